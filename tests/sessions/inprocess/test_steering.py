"""Steering the in-process runtime: a redirect joins the running turn at the next step boundary."""

from __future__ import annotations

from pathlib import Path

from drupe.agent.models.script import Echo, Text, ToolCall
from drupe.sessions.drivers.base import (
    ChunkEvent,
    ResumeToken,
    SteerBoundary,
    SteerUndelivered,
    TurnComplete,
    UsageEvent,
    UserInput,
)
from tests.sessions.inprocess.support import (
    Reader,
    chunks,
    connect,
    driver_for,
    kinds,
    said,
    script_model,
    session,
    text_of,
)


async def test_a_redirect_is_injected_at_the_next_step_boundary(tmp_path: Path) -> None:
    # step 0 calls a tool; the steer then starts the scripted model over (a new user prompt):
    # step 0 again, then step 1 echoes what the model was sent as the last user message
    model_id = script_model(
        [[Text("Looking around."), ToolCall("list_dir", {})], [Echo(prefix="Heard: ")]]
    )
    async with driver_for() as driver:
        connection = await connect(driver, session(tmp_path / "ws", model_id))
        reader = Reader(connection)
        await connection.send(said("tidy up", "u1"))
        steer = said("also sort the notes", "u2", system_reminder=True)
        assert await connection.redirect(steer) is True
        events = await reader.turn()
        await connection.close()

    boundary = next(i for i, e in enumerate(events) if isinstance(e, SteerBoundary))
    assert events[boundary] == SteerBoundary((steer,))
    before, after = events[:boundary], events[boundary + 1 :]
    # A1a: one whole step (text, tool call and its output) then its usage
    assert [c["type"] for c in chunks(before)][-3:] == [
        "tool-output-available",
        "finish-step",
        "message-metadata",
    ]
    assert text_of(before) == "Looking around."
    # nothing of the next step comes before the boundary; the token moves to the steer
    assert isinstance(after[0], ResumeToken) and after[0].token == "u2"
    assert kinds(after)[1] == "start-step"
    # A2: the model saw the steer wrapped as a reminder
    answer = text_of(after)
    assert answer.startswith("Looking around.Heard: <system-reminder>")
    assert "while you were working" in answer and "also sort the notes" in answer
    assert isinstance(events[-1], TurnComplete)
    assert not any(isinstance(e, SteerUndelivered) for e in events)
    # usage after the boundary counts from the boundary (it belongs to A2's row): A2's first
    # metadata is exactly the usage of its first model request
    steps = [e.invocation["usage"] for e in events if isinstance(e, UsageEvent)]
    a2_metadata = [c for c in chunks(after) if c["type"] == "message-metadata"]
    assert len(steps) == 3 and len(a2_metadata) == 2
    assert a2_metadata[0]["messageMetadata"]["usage"] == steps[1]
    assert a2_metadata[1]["messageMetadata"]["usage"]["outputTokens"] == (
        steps[1]["outputTokens"] + steps[2]["outputTokens"]
    )


async def test_a_steer_during_the_last_step_comes_back_undelivered(tmp_path: Path) -> None:
    model_id = script_model([[Text("All done here.")]])
    async with driver_for() as driver:
        connection = await connect(driver, session(tmp_path / "ws", model_id))
        reader = Reader(connection)
        await connection.send(said("finish", "u1"))
        steer = said("one more thing", "u2", system_reminder=True)
        assert await connection.redirect(steer) is True
        events = await reader.turn()
        # the turn is over: the next redirect is refused (the host queues it)
        assert await connection.redirect(said("later", "u3")) is False
        await connection.close()

    assert not any(isinstance(e, SteerBoundary) for e in events)
    assert [e for e in events if e.type != "context-usage"][-2:] == [
        SteerUndelivered((steer,)),
        TurnComplete(),
    ]
    assert text_of(events) == "All done here."


async def test_redirect_refuses_with_no_turn_or_a_non_text_message(tmp_path: Path) -> None:
    model_id = script_model([[Text("fine")]])
    async with driver_for() as driver:
        connection = await connect(driver, session(tmp_path / "ws", model_id))
        reader = Reader(connection)
        assert await connection.redirect(said("nobody is working", "u0")) is False
        await connection.send(said("go", "u1"))
        image = UserInput(
            message={
                "id": "u2",
                "role": "user",
                "parts": [
                    {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="}
                ],
            },
            system_reminder=True,
        )
        assert await connection.redirect(image) is False
        events = await reader.turn()
        await connection.close()
    assert isinstance(events[-1], TurnComplete)
    assert not any(isinstance(e, SteerUndelivered | SteerBoundary) for e in events)


async def test_several_steers_fold_into_one_boundary_and_the_next_turn_remembers_them(
    tmp_path: Path,
) -> None:
    model_id = script_model([[ToolCall("list_dir", {})], [Echo(prefix="Heard: ")]])
    async with driver_for() as driver:
        connection = await connect(driver, session(tmp_path / "ws", model_id))
        reader = Reader(connection)
        await connection.send(said("start", "u1"))
        first = said("first steer", "u2", system_reminder=True)
        second = said("second steer", "u3", system_reminder=True)
        assert await connection.redirect(first) is True
        assert await connection.redirect(second) is True
        events = await reader.turn()
        await connection.close()

    boundaries = [e for e in events if isinstance(e, SteerBoundary)]
    assert boundaries == [SteerBoundary((first, second))]
    assert [e.token for e in events if isinstance(e, ResumeToken)] == ["u1", "u3"]
    roles = [(m["id"] if m["role"] == "user" else m["role"]) for m in connection.history]
    assert roles == ["u1", "assistant", "u2", "u3", "assistant"]
    assert all(isinstance(e, ChunkEvent) for e in events if e.type == "chunk")
