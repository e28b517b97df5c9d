"""A remote A2A agent's progress streams into the calling turn live; a stop cancels its task.

The remote is ``a2a-sdk``'s own server (``a2a_paced_agent``) on loopback; the caller is a Drupe
agent session whose scripted model calls ``a2a_paced``. The remote takes each step only after
the test saw the previous one in both of the calling turn's subscribers: progress that reached
them late (only with the result) would leave the remote waiting and the test timing out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from a2a.types.a2a_pb2 import TaskState

from drupe.admission.base import Submit
from drupe.admission.principal import LOCAL_ADMIN
from drupe.app import Runtime, open_runtime
from drupe.chunks.accumulate import Accumulator
from drupe.chunks.types import Chunk
from drupe.ids import session_conversation_id
from drupe.streaming.listeners.sse import SseListener
from drupe.testing.recording import RecordingListener
from tests.gateway.conftest import make_settings
from tests.protocols.a2a_paced_agent import PacedAgent, paced_agent

pytestmark = pytest.mark.slow

_CALL = "tool-a2a_paced"


@pytest.fixture
async def remote() -> AsyncIterator[PacedAgent]:
    async with paced_agent() as agent:
        yield agent


@pytest.fixture
async def runtime(tmp_path: Path, remote: PacedAgent) -> AsyncIterator[Runtime]:
    config = tmp_path / "caller.toml"  # make_settings writes config.toml
    config.write_text(
        'default_model = "scripted:echo"\n'
        f'[a2a.remotes.paced]\nurl = "{remote.url}"\nprogress_interval_s = 0\n'
    )
    async with open_runtime(make_settings(tmp_path, config_path=config)) as rt:
        yield rt


async def _start(runtime: Runtime, tmp_path: Path, *listeners: RecordingListener) -> str:
    args = quote(json.dumps({"message": "find sources"}, separators=(",", ":")))
    agent = await runtime.db.agents.create_agent(
        name="caller", driver_type="inprocess", workspace=str(tmp_path / "caller"),
        model_id=f"scripted:tool?tool=a2a_paced&args={args}", tools=["a2a_paced"],
    )  # fmt: skip
    session = await runtime.db.agents.create_session(agent.id)
    conversation = session_conversation_id(session.id)
    submit = Submit(conversation_id=conversation, parts=[{"type": "text", "text": "go"}])
    await runtime.conversations.submit(LOCAL_ADMIN, submit, subscribers=listeners)
    return conversation


def _progress(listener: RecordingListener) -> list[dict[str, Any]]:
    return [
        c["output"]
        for c in listener.chunks()
        if c["type"] == "tool-output-available" and c.get("preliminary") is True
    ]


async def _until_seen(listeners: tuple[RecordingListener, ...], count: int) -> None:
    """Poll (the listeners have no event to wait on) until each saw ``count`` updates."""
    with anyio.move_on_after(20):
        while any(len(_progress(listener)) < count for listener in listeners):  # noqa: ASYNC110
            await anyio.sleep(0.01)
    for listener in listeners:
        assert len(_progress(listener)) >= count, listener.chunks()


def _tool_chunks(listener: RecordingListener) -> list[Chunk]:
    return [c for c in listener.chunks() if str(c["type"]).startswith("tool-")]


async def test_the_remote_tasks_updates_reach_every_subscriber_in_order_before_the_result(
    tmp_path: Path, runtime: Runtime, remote: PacedAgent
) -> None:
    listeners = (RecordingListener("tab-1"), RecordingListener("tab-2"))
    conversation = await _start(runtime, tmp_path, *listeners)
    # submitted, then working "looking things up": seen before the remote goes on
    await _until_seen(listeners, 2)
    late = SseListener("web-tab")  # the browser's resume stream, joining mid-call
    for seen, gate in zip((3, 4, 5), remote.gates, strict=False):
        gate.set()
        await _until_seen(listeners, seen)
        if seen == 3:
            assert await runtime.conversations.resume(LOCAL_ADMIN, conversation, late, None)
    remote.gates[3].set()
    with anyio.fail_after(20):
        for listener in listeners:
            await listener.wait_done()
        wire = b"".join([batch async for batch in late.buffer.frames()])

    (task,) = await remote.tasks()
    ids = {"taskId": task.id, "contextId": task.context_id}
    expected = [
        {**ids, "state": "submitted", "text": ""},
        {**ids, "state": "working", "text": "", "status": "looking things up"},
        {**ids, "state": "working", "text": "Part one. ", "status": "looking things up"},
        {**ids, "state": "working", "text": "Part one. ", "status": "reading sources"},
        {**ids, "state": "working", "text": "Part one. Part two.", "status": "reading sources"},
    ]
    final = {**ids, "state": "completed", "text": "Part one. Part two."}
    for listener in listeners:
        assert _progress(listener) == expected
        tools = _tool_chunks(listener)
        # the call's input first, then every update, then the final output
        assert tools[0]["type"] in ("tool-input-start", "tool-input-available")
        last = tools[-1]
        assert last["type"] == "tool-output-available" and "preliminary" not in last
        assert last["output"] == final
        first_progress = next(i for i, c in enumerate(tools) if c.get("preliminary"))
        assert all(c["type"].startswith("tool-input") for c in tools[:first_progress])

    rows = await runtime.db.messages.list_for_conversation(conversation)
    answer = rows[-1]
    assert answer.status == "success"
    (part,) = [p for p in answer.parts if p["type"] == _CALL]
    assert part["state"] == "output-available" and part["output"] == final
    assert "preliminary" not in part
    # what the database holds is what a subscriber rebuilt from the live stream
    assert listeners[0].message()["parts"] == answer.parts
    # the late SSE subscriber: the replay up to the join, then the later updates live, in order
    sse = [
        json.loads(line[6:]) for line in wire.decode().splitlines() if line.startswith("data: {")
    ]
    sse_progress = [c["output"] for c in sse if c.get("preliminary") is True]
    assert sse_progress[-2:] == expected[-2:]
    assert all(p in expected for p in sse_progress)
    rebuilt = Accumulator()
    for chunk in sse:
        rebuilt.push(chunk)
    assert rebuilt.snapshot()["parts"] == answer.parts
    # the model was given the final output, not a progress snapshot
    text = "".join(p.get("text", "") for p in answer.parts if p["type"] == "text")
    assert "Part one. Part two." in text and '"completed"' in text


async def test_a_stop_cancels_the_remote_task_after_its_progress_was_seen(
    tmp_path: Path, runtime: Runtime, remote: PacedAgent
) -> None:
    listener = RecordingListener("tab")
    conversation = await _start(runtime, tmp_path, listener)
    remote.gates[0].set()
    await _until_seen((listener,), 3)  # "Part one. " arrived; gate 1 stays closed
    assert await runtime.conversations.stop(LOCAL_ADMIN, conversation)

    (task,) = await remote.tasks()
    assert remote.cancels == [task.id]
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert _progress(listener)[-1]["text"] == "Part one. "
    rows = await runtime.db.messages.list_for_conversation(conversation)
    answer = rows[-1]
    assert answer.status == "paused"
    (part,) = [p for p in answer.parts if p["type"] == _CALL]
    # the progress was not a result: the stopped call is closed as interrupted, nothing kept
    assert part["state"] == "output-error" and part["errorText"] == "Interrupted by user"
    assert "output" not in part and "preliminary" not in part
