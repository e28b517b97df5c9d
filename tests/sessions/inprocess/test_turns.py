"""In-process driver turns through the real agent loop: text, tools, errors, history, reconcile."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from drupe.agent.models.script import Fail, Text, ToolCall
from drupe.errors import DriverError, ValidationError
from drupe.sessions.drivers.base import (
    ChunkEvent,
    ConnectTarget,
    ContextUsage,
    Driver,
    ErrorEvent,
    ResumeToken,
    SteerBoundary,
    TurnComplete,
    UsageEvent,
)
from drupe.testing.driver_check import check_driver
from tests.sessions.inprocess.support import (
    Histories,
    Models,
    Reader,
    Recorded,
    assistant,
    chunks,
    connect,
    driver_for,
    kinds,
    said,
    script_model,
    session,
    text_of,
    user,
)


async def test_a_text_turn_streams_chunks_without_framing_then_turn_complete(
    tmp_path: Path,
) -> None:
    model_id = script_model([[Text("Hello from the workspace agent")]])
    async with driver_for(context_window=lambda model: 200) as driver:
        assert isinstance(driver, Driver) and driver.type == "inprocess"
        connection = await connect(driver, session(tmp_path / "ws", model_id))
        assert driver.capabilities.steer and driver.capabilities.context_usage
        assert callable(connection.redirect)
        assert await connection.context_usage() is None
        reader = Reader(connection)
        await connection.send(said("hi"))
        events = await reader.turn()
        context = await connection.context_usage()
        await connection.close()

    # the context after the turn: the request (1 word) plus the answer (5 words)
    assert context == {"totalTokens": 6, "maxTokens": 200, "percentage": 3.0}
    assert ContextUsage({"totalTokens": 6}) in events

    assert events[0] == ResumeToken("u1")
    assert isinstance(events[-1], TurnComplete)
    assert "start" not in kinds(events) and "finish" not in kinds(events)
    assert [k for k in kinds(events) if k in ("start-step", "finish-step")] == [
        "start-step",
        "finish-step",
    ]
    assert text_of(events) == "Hello from the workspace agent"
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert len(usage) == 1 and usage[0].invocation["model"] == model_id
    metadata = [c for c in chunks(events) if c["type"] == "message-metadata"]
    assert metadata[-1]["messageMetadata"]["usage"]["outputTokens"] == 5


async def test_a_tool_turn_writes_and_reads_files_inside_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    model_id = script_model(
        [
            # The calls of one step run concurrently, so the reads come one step later.
            [ToolCall("write_file", {"path": "notes/todo.txt", "content": "buy milk"})],
            [
                ToolCall("read_file", {"path": "notes/todo.txt"}),
                ToolCall("list_dir", {"path": "notes"}),
                ToolCall("search_files", {"pattern": "mil+k"}),
            ],
            [Text("Done.")],
        ]
    )
    async with driver_for() as driver:
        connection = await connect(driver, session(workspace, model_id))
        reader = Reader(connection)
        await connection.send(said("note it"))
        events = await reader.turn()
        await connection.close()

    assert (workspace / "notes" / "todo.txt").read_text() == "buy milk"
    outputs = [c["output"] for c in chunks(events) if c["type"] == "tool-output-available"]
    assert outputs == [
        {"path": "notes/todo.txt", "bytes": 8},
        {"path": "notes/todo.txt", "content": "buy milk", "truncated": False},
        {"path": "notes", "entries": [{"name": "todo.txt", "type": "file", "size": 8}]},
        {
            "matches": [{"path": "notes/todo.txt", "line": 1, "text": "buy milk"}],
            "truncated": False,
        },
    ]
    assert text_of(events) == "Done."
    assert isinstance(events[-1], TurnComplete)
    assert [k for k in kinds(events) if k == "start-step"] == ["start-step"] * 3


async def test_confinement_refusals_reach_the_model_as_tool_errors(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    workspace.mkdir()
    (workspace / "link").symlink_to(outside)
    model_id = script_model(
        [
            [
                ToolCall("read_file", {"path": "../outside/secret.txt"}),
                ToolCall("read_file", {"path": "link/secret.txt"}),
                ToolCall("write_file", {"path": str(outside / "new.txt"), "content": "x"}),
                ToolCall("write_file", {"path": "link/new.txt", "content": "x"}),
                ToolCall("list_dir", {"path": "link"}),
            ],
            [Text("Refused.")],
        ]
    )
    async with driver_for() as driver:
        connection = await connect(driver, session(workspace, model_id))
        reader = Reader(connection)
        await connection.send(said("escape"))
        events = await reader.turn()
        await connection.close()

    errors = [c["errorText"] for c in chunks(events) if c["type"] == "tool-output-error"]
    assert len(errors) == 5
    assert all("outside the workspace" in text for text in errors)
    assert not (outside / "new.txt").exists()
    assert "secret" not in str([c for c in chunks(events) if c["type"] == "text-delta"])
    assert isinstance(events[-1], TurnComplete)


async def test_the_shell_is_absent_unless_enabled(tmp_path: Path) -> None:
    model_id = script_model([[ToolCall("shell", {"command": "touch made.txt"})], [Text("ok")]])
    async with driver_for() as driver:
        connection = await connect(driver, session(tmp_path / "ws", model_id))
        reader = Reader(connection)
        await connection.send(said("run it"))
        events = await reader.turn()
        await connection.close()

    assert not (tmp_path / "ws" / "made.txt").exists()
    assert "tool-output-available" not in kinds(events)
    assert "tool-approval-request" not in kinds(events)
    assert isinstance(events[-1], TurnComplete)


async def test_a_model_failure_is_an_error_event_and_the_connection_lives_on(
    tmp_path: Path,
) -> None:
    failing = script_model([[Fail(400, body="bad request")]])
    fine = script_model([[Text("recovered")]])
    async with driver_for() as driver:
        connection = await connect(driver, session(tmp_path / "ws", failing))
        reader = Reader(connection)
        await connection.send(said("one", "u1"))
        failed = await reader.turn()
        assert await connection.reconcile(ConnectTarget(model_id=fine)) == "patched"
        await connection.send(said("two", "u2"))
        recovered = await reader.turn()
        await connection.close()

    assert isinstance(failed[-1], ErrorEvent)
    assert failed[-1].error["name"] == "ProviderError"
    assert failed[-1].error["statusCode"] == 400
    assert text_of(recovered) == "recovered"
    assert isinstance(recovered[-1], TurnComplete)


async def test_resume_token_is_the_last_user_message_seen_and_emitted_on_change(
    tmp_path: Path,
) -> None:
    model_id = script_model([[Text("fine")]])
    async with driver_for() as driver:
        connection = await connect(driver, session(tmp_path / "ws", model_id), resume_token="u0")
        reader = Reader(connection)
        await connection.send(said("first", "u1"))
        first = await reader.turn()
        await connection.send(said("second", "u2"))
        second = await reader.turn()
        await connection.close()

    assert [e for e in first if isinstance(e, ResumeToken)] == [ResumeToken("u1")]
    assert [e for e in second if isinstance(e, ResumeToken)] == [ResumeToken("u2")]
    assert connection.resume_token == "u2"


async def test_a_cold_connect_loads_the_history_once_and_the_model_sees_it(
    tmp_path: Path,
) -> None:
    recorded = Recorded("noted")
    models = Models({"rec": recorded.model()})
    # the store already holds this turn's user row and its empty pending assistant row
    histories = Histories(
        {
            "s1": [
                user("earlier question", "u0"),
                assistant("earlier answer", "a0"),
                user("now", "u1"),
                {"id": "a1", "role": "assistant", "parts": []},
            ]
        }
    )
    async with driver_for(models, histories) as driver:
        connection = await connect(driver, session(tmp_path / "ws", "rec"), resume_token="u0")
        reader = Reader(connection)
        await connection.send(said("now", "u1"))
        await reader.turn()
        await connection.send(said("and then", "u2"))
        await reader.turn()
        await connection.close()

    assert histories.loads == ["s1"]
    first, second = recorded.seen

    def texts(messages: list[object]) -> list[str]:
        out: list[str] = []
        for message in messages:
            if isinstance(message, ModelRequest):
                out += [str(p.content) for p in message.parts if isinstance(p, UserPromptPart)]
            elif isinstance(message, ModelResponse):
                out += [p.content for p in message.parts if isinstance(p, TextPart)]
        return out

    assert texts(first) == ["earlier question", "earlier answer", "now"]
    assert texts(second) == ["earlier question", "earlier answer", "now", "noted", "and then"]


async def test_reconcile_verdicts(tmp_path: Path) -> None:
    model_id = script_model([[Text("x")]])
    other = script_model([[Text("y")]])
    info = session(tmp_path / "ws", model_id, instructions="Be brief.")
    async with driver_for() as driver:
        connection = await connect(driver, info)
        reader = Reader(connection)
        assert await connection.reconcile(ConnectTarget.of(info)) == "current"
        assert await connection.reconcile(ConnectTarget(model_id="scripted:nope")) == "invalid"
        assert await connection.reconcile(ConnectTarget.of(info)) == "current"
        patched = ConnectTarget(model_id=other, instructions="Be brief.")
        assert await connection.reconcile(patched) == "patched"
        assert await connection.reconcile(patched) == "current"
        await connection.send(said("go"))
        events = await reader.turn()
        usage = [e for e in events if isinstance(e, UsageEvent)]
        assert usage[0].invocation["model"] == other
        await connection.close()
        await connection.close()  # idempotent
        assert await reader.rest() == []
        with pytest.raises(DriverError):
            await connection.send(said("late", "u9"))
        assert await connection.redirect(said("late", "u9")) is False


async def test_validate_session_creates_the_workspace_or_refuses(tmp_path: Path) -> None:
    async with driver_for() as driver:
        driver.validate_session(session(tmp_path / "a" / "b", "scripted:lorem"))
        assert (tmp_path / "a" / "b").is_dir()
        (tmp_path / "file").write_text("not a dir")
        with pytest.raises(ValidationError):
            driver.validate_session(session(tmp_path / "file", "scripted:lorem"))
        with pytest.raises(ValidationError):
            driver.validate_session(session(tmp_path / "file" / "sub", "scripted:lorem"))
        with pytest.raises(ValidationError):
            driver.validate_session(session(None, "scripted:lorem"))  # type: ignore[arg-type]
        with pytest.raises(DriverError):
            await connect(driver, session(tmp_path / "ws", "scripted:nope"))


async def test_send_while_a_turn_runs_is_refused(tmp_path: Path) -> None:
    model_id = script_model([[Text("one two three")]])
    async with driver_for() as driver:
        connection = await connect(driver, session(tmp_path / "ws", model_id))
        reader = Reader(connection)
        await connection.send(said("first", "u1"))
        with pytest.raises(DriverError):
            await connection.send(said("second", "u2"))
        events = await reader.turn()
        await connection.close()
    assert isinstance(events[-1], TurnComplete)
    assert all(not isinstance(e, ChunkEvent) or e.chunk["type"] != "error" for e in events)


async def test_the_driver_passes_the_conformance_check(tmp_path: Path) -> None:
    model_id = script_model([[ToolCall("list_dir", {})], [Text("checked")]])
    async with driver_for() as driver:
        report = await check_driver(
            driver, session(tmp_path / "ws", model_id), within_s=10, try_redirect=True
        )
        failing = script_model([[Fail(400)]])
        errored = await check_driver(
            driver, session(tmp_path / "ws", failing), within_s=10, expect_error=True
        )
    assert report.steerable and report.redirect_result is True
    assert report.verdict == "current"
    assert any(isinstance(e, SteerBoundary) for e in report.events)
    assert errored.verdict == "current"
