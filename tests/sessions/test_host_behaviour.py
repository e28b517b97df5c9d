"""Agent approvals in place, Stop, validation, and the fake driver's conformance check."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from drupe.api.agent_schemas import runtime_json
from drupe.errors import UnknownConversationError, ValidationError
from drupe.sessions.drivers.base import (
    CompactionComplete,
    CompactionStart,
    ContextUsage,
    SessionInfo,
    SupportedCommands,
    TurnComplete,
)
from drupe.sessions.state import Idle, Transition
from drupe.testing.driver_check import check_driver
from drupe.testing.fake_driver import FakeDriver, text_turn
from tests.sessions.support import Env, Watcher, text_of

TOOL_INPUT = [
    {"type": "start-step"},
    {"type": "tool-input-start", "toolCallId": "call-1", "toolName": "bash"},
    {"type": "tool-input-available", "toolCallId": "call-1", "toolName": "bash", "input": {}},
]


async def test_agent_approval_in_place_denial_emits_tool_output_denied(env: Env) -> None:
    sid = await env.new_session()
    watcher = Watcher()
    first = await env.submit(sid, "delete the logs", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks([{"type": "start", "messageId": first.placeholder_ids[0]}, *TOOL_INPUT])
    conn.request_approval("ap-1", "call-1", "bash")
    await watcher.wait_chunk("tool-approval-request")
    assert env.manager.is_live(f"agent-session:{sid}"), "the turn waits in place"
    assert await env.host.respond_approval(sid, "ap-1", approved=False, reason="no")
    assert await conn.wait_approval("ap-1") == (False, "no")
    assert not await env.host.respond_approval(sid, "ap-1", approved=True), "resolved once"
    denied = await watcher.wait_chunk("tool-output-denied")
    assert denied.chunk == {"type": "tool-output-denied", "toolCallId": "call-1"}
    conn.emit_chunks([{"type": "finish-step"}, {"type": "finish"}])
    conn.complete()
    await watcher.wait_terminals(1)
    await env.manager.wait_settled(f"agent-session:{sid}")
    rows = await env.rows(sid)
    tool = next(p for p in rows[1].parts if p["type"] == "tool-bash")
    assert tool["state"] == "output-denied"


async def test_headless_turn_cannot_answer_an_approval_and_is_denied(env: Env) -> None:
    sid = await env.new_session()
    watcher = Watcher()
    first = await env.submit(sid, "nightly job", [watcher], headless=True)
    conn = await env.driver.wait_connections(1)
    sent = await conn.wait_sends(1)
    assert sent.headless is True
    conn.emit_chunks([{"type": "start", "messageId": first.placeholder_ids[0]}, *TOOL_INPUT])
    conn.request_approval("ap-2", "call-1", "bash")
    decision = await conn.wait_approval("ap-2")
    assert decision[0] is False
    await watcher.wait_chunk("tool-output-denied")
    kinds = [e.chunk["type"] for e in watcher.events]
    assert "tool-approval-request" not in kinds and kinds[-1] == "tool-output-denied"
    conn.complete()
    await watcher.wait_terminals(1)


async def test_stop_pauses_the_turn_closes_the_connection_and_drops_the_queue(env: Env) -> None:
    env.driver.steerable = False
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "long job", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["halfway"])[:4])
    await conn.wait_consumed()
    queued = await env.submit(sid, "then this")
    assert await env.manager.abort_and_drain(cid)
    await conn.closed.wait()
    end = await watcher.wait_terminals(1)
    assert end.status == "paused" and end.is_conversation_done is True
    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "paused"),
        ("user", "success"),
    ]
    assert text_of(rows[1]) == "halfway"
    assert rows[2].id == queued.user_message_id, "the dropped follow-up stays visible"
    entry = env.entry(sid)
    assert entry.state.queue == () and entry.state.execution == Idle()
    assert any("dropped follow-ups" in line for line in entry.log)
    # The next submit is a fresh turn on a new connection.
    await env.submit(sid, "again", [Watcher("wc:2")])
    second = await env.driver.wait_sent(2)
    assert second is not conn
    second.emit_text("x", ["ok"])
    await env.manager.wait_settled(cid)


async def test_stop_during_a_steer_roll_ends_as_a_user_stop_keeping_the_partial(
    env: Env,
) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "one", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["a"]))
    await conn.wait_consumed()
    steer = await env.submit(sid, "steer")
    await conn.wait_redirects(1)
    late = await env.submit(sid, "a second steer")  # folded after the boundary: dropped
    watcher.hold = anyio.Event()
    conn.boundary(conn.redirects[0])
    conn.emit_chunks(text_turn("a2", ["buffered"])[1:5])
    await watcher.wait_terminals(1)
    await conn.wait_consumed()
    assert isinstance(env.entry(sid).state.execution, Transition)
    async with anyio.create_task_group() as tg:
        tg.start_soon(env.host.stop, sid)  # nothing live to abort: A2 is latched paused
        await env.wait_for(lambda: env.entry(sid).state.connection == "disconnected")
        execution = env.entry(sid).state.execution
        assert isinstance(execution, Transition) and execution.terminal == ("paused", None)
        watcher.hold.set()
    await env.manager.wait_settled(cid)
    await env.wait_for(lambda: env.entry(sid).state.execution == Idle())
    await conn.closed.wait()
    rows = await env.rows(sid)
    by_id = {r.id: r for r in rows}
    a2 = next(r for r in rows if r.role == "assistant" and r.parent_id == steer.user_message_id)
    # The stop ends A2 like a chat stop: the buffered partial is kept, the row is paused.
    assert a2.status == "paused" and text_of(a2) == "buffered", (env.entry(sid).log, a2.parts)
    assert [t.status for t in watcher.terminals] == ["success", "paused"]
    assert watcher.terminals[1].is_conversation_done is True
    # The steer folded after the boundary is dropped visibly: its row stays unanswered.
    assert by_id[late.user_message_id].status == "success"
    assert not [r for r in rows if r.parent_id == late.user_message_id]
    assert any("dropped follow-ups" in line and "stopped" in line for line in env.entry(sid).log)
    assert not env.host.is_busy(sid)


async def test_validation_refuses_before_writing(env: Env, tmp_path: Path) -> None:
    with pytest.raises(UnknownConversationError):
        await env.submit("nope", "hi")
    sid = await env.new_session(model_id=None)
    with pytest.raises(ValidationError, match="has no model"):
        await env.submit(sid, "hi")
    assert await env.rows(sid) == []
    env.driver.require_workspace = True
    await env.db.agents.update_agent(
        env.agent_id, model_id="scripted:a", workspace=str(tmp_path / "missing")
    )
    with pytest.raises(ValidationError, match="workspace"):
        await env.submit(sid, "hi")
    assert await env.rows(sid) == []


@pytest.mark.parametrize("steerable", [True, False])
async def test_fake_driver_passes_the_driver_check(steerable: bool) -> None:
    driver = FakeDriver(steerable=steerable)
    driver.script = [[*(_chunk(c) for c in text_turn("m", ["hi"])), TurnComplete()]]
    session = SessionInfo(
        session_id="s1", agent_id="a1", agent_name="a", driver_type="fake", model_id="m"
    )
    report = await check_driver(driver, session, try_redirect=True)
    assert report.steerable is steerable
    assert report.chunks[0]["type"] == "start"
    assert report.verdict == "current"
    assert driver.last.close_calls == 2


def _chunk(chunk: dict[str, object]) -> object:
    from drupe.sessions.drivers.base import ChunkEvent

    return ChunkEvent(chunk)


async def test_a_failed_a2_save_errors_the_held_stream(env: Env) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "one", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["a"]))
    await conn.wait_consumed()
    steer = await env.submit(sid, "steer")
    await conn.wait_redirects(1)
    watcher.hold = anyio.Event()
    conn.boundary()
    conn.emit_chunks(text_turn("a2", ["lost"])[:4])
    await watcher.wait_terminals(1)
    await conn.wait_consumed()
    assert watcher.terminals[0].is_conversation_done is False
    # The steer row disappears: A2's row cannot be saved under it.
    assert steer.user_message_id is not None
    await env.db.messages.delete([steer.user_message_id])
    watcher.hold.set()
    end = await watcher.wait_terminals(2)
    assert end.status == "error" and end.is_conversation_done is True
    await env.wait_for(lambda: env.entry(sid).state.execution == Idle())
    assert env.manager.get(cid) is None
    assert any("dropped 4 chunk(s)" in line for line in env.entry(sid).log)
    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [("user", "success"), ("assistant", "success")]


async def test_follow_up_during_idle_compaction_waits_for_its_turn(env: Env) -> None:
    sid = await env.new_session()
    assert await env.host.prime(sid)
    conn = await env.driver.wait_connections(1)
    conn.emit(CompactionStart("manual"))
    await conn.wait_consumed()
    watcher = Watcher()
    queued = await env.submit(sid, "after compaction", [watcher])
    assert queued.mode == "injected" and env.manager.get(f"agent-session:{sid}") is None
    assert env.entry(sid).state.queue != ()
    conn.emit(CompactionComplete())
    sent = await conn.wait_sends(1)
    assert sent.message["id"] == queued.user_message_id
    conn.emit_text("x", ["answered"])
    end = await watcher.wait_terminals(1)
    assert end.status == "success" and watcher.texts() == ["answered"]
    await env.manager.wait_settled(f"agent-session:{sid}")


async def test_a_runtime_that_dies_mid_turn_ends_the_turn_in_error(env: Env) -> None:
    sid = await env.new_session()
    watcher = Watcher()
    first = await env.submit(sid, "go", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["partial"])[:4])
    conn.crash()
    end = await watcher.wait_terminals(1)
    assert end.status == "error" and end.error is not None
    assert "ended the connection" in end.error["message"]
    await conn.closed.wait()
    await env.manager.wait_settled(f"agent-session:{sid}")
    rows = await env.rows(sid)
    assert rows[1].status == "error" and text_of(rows[1]) == "partial"
    assert env.entry(sid).state.connection == "disconnected"


async def test_a_new_connection_waits_until_the_stopped_runtime_has_closed(env: Env) -> None:
    """Issue 8 point 1: a session never has two runtimes (e.g. two CLI processes) at once."""
    sid = await env.new_session()
    first = await env.submit(sid, "one")
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["partial"])[:4])
    await conn.wait_consumed()
    gate = anyio.Event()
    real_close = conn.close

    async def slow_close() -> None:
        await gate.wait()  # the old runtime takes its time to exit
        await real_close()

    conn.close = slow_close  # type: ignore[method-assign]
    stopped = anyio.Event()

    async def stop() -> None:
        await env.host.stop(sid)
        stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop)
        await env.wait_for(lambda: env.entry(sid).state.connection == "disconnected")
        watcher = Watcher()
        tg.start_soon(env.submit, sid, "two", [watcher])
        await env.wait_for(lambda: env.entry(sid).state.connection == "connecting")
        # Stop has not returned and no second runtime was started while the first lives.
        assert not stopped.is_set()
        assert env.driver.connects == 1
        gate.set()
        second = await env.driver.wait_connections(2)
        assert conn.closed.is_set()
        await second.wait_sends(1)
        second.emit_text("x", ["fresh"])
        await watcher.wait_terminals(1)
    assert stopped.is_set()
    await env.manager.wait_settled(f"agent-session:{sid}")


async def test_context_usage_and_commands_are_published_when_they_change(env: Env) -> None:
    """Issue 8 point 4: the REST session state holds them; the stream gets a data chunk on
    each change (transient: never stored in the answer)."""
    sid = await env.new_session()
    watcher = Watcher()
    first = await env.submit(sid, "hi", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    usage = {"totalTokens": 1200, "maxTokens": 200000, "percentage": 0.6}
    conn.emit(SupportedCommands(("compact", "review")), ContextUsage(usage))
    conn.emit(SupportedCommands(("compact", "review")), ContextUsage(dict(usage)))
    conn.emit_text(first.placeholder_ids[0], ["ok"])
    await watcher.wait_terminals(1)
    await env.manager.wait_settled(f"agent-session:{sid}")
    state = [e.chunk for e in watcher.events if e.chunk["type"].startswith("data-")]
    assert state == [
        {
            "type": "data-session-commands",
            "id": "data-session-commands",
            "data": {"commands": ["compact", "review"]},
            "transient": True,
        },
        {
            "type": "data-context-usage",
            "id": "data-context-usage",
            "data": usage,
            "transient": True,
        },
    ]
    shown = runtime_json(env.entry(sid))
    assert shown["commands"] == ["compact", "review"]
    assert shown["contextUsage"] is not None
    rows = await env.rows(sid)
    assert not [p for p in rows[1].parts if p["type"].startswith("data-")]


async def test_context_usage_is_fetched_only_when_read_and_at_most_once_per_turn(
    env: Env,
) -> None:
    """Issue 23.2: a fetch may cost the runtime's provider a burst of requests (the Claude Code
    CLI sends ~20-35 ``count_tokens``): none while nobody reads the usage, one per turn after."""
    env.driver.context_usage = {"totalTokens": 10, "maxTokens": 100}
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    for n in range(2):
        sent = await env.submit(sid, f"turn {n}")
        conn = await env.driver.wait_connections(1)
        await conn.wait_sends(n + 1)
        conn.emit_text(sent.placeholder_ids[0], ["ok"])
        await env.manager.wait_settled(cid)
        await env.wait_for(lambda: not env.host.is_busy(sid))
    assert env.driver.context_usage_calls == 0  # nobody asked
    assert await env.host.refresh_context_usage(sid) == {"totalTokens": 10, "maxTokens": 100}
    env.driver.context_usage = {"totalTokens": 20, "maxTokens": 100}
    assert await env.host.refresh_context_usage(sid) == {"totalTokens": 10, "maxTokens": 100}
    assert env.driver.context_usage_calls == 1  # the second read of the same turn: cached
    sent = await env.submit(sid, "turn 3")
    await conn.wait_sends(3)
    conn.emit_text(sent.placeholder_ids[0], ["ok"])
    await env.manager.wait_settled(cid)
    await env.wait_for(lambda: not env.host.is_busy(sid))
    assert await env.host.refresh_context_usage(sid) == {"totalTokens": 20, "maxTokens": 100}
    assert await env.host.refresh_context_usage(sid) == {"totalTokens": 20, "maxTokens": 100}
    assert env.driver.context_usage_calls == 2
    assert runtime_json(env.entry(sid))["contextUsage"] == {"totalTokens": 20, "maxTokens": 100}
