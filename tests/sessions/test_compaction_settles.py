"""Issue 8 point 6: a compaction never leaves a session busy.

It settles on its own end event, on the turn's terminal, when the connection ends, or after the
host's time bound; the Claude Code translator ends a compaction at the result, and a
``compact_error`` without ``compact_result: failed`` fails it.
"""

from __future__ import annotations

import anyio
from claude_agent_sdk import SystemMessage

from drupe.sessions.drivers.base import (
    CompactionComplete,
    CompactionError,
    CompactionStart,
    TurnComplete,
)
from tests.sessions.claude_code.test_events import fresh, result, run, status
from tests.sessions.support import Env, Watcher


async def _compacting_session(env: Env) -> tuple[str, object]:
    sid = await env.new_session()
    assert await env.host.prime(sid)
    conn = await env.driver.wait_connections(1)
    conn.emit(CompactionStart("manual"))
    await conn.wait_consumed()
    assert env.entry(sid).state.compacting and env.host.is_busy(sid)
    return sid, conn


async def test_compaction_settles_when_the_turn_ends_without_an_end_event(env: Env) -> None:
    sid, conn = await _compacting_session(env)
    conn.emit(TurnComplete())  # type: ignore[attr-defined]
    await conn.wait_consumed()  # type: ignore[attr-defined]
    assert not env.entry(sid).state.compacting
    assert not env.host.is_busy(sid)


async def test_compaction_settles_when_the_connection_ends(env: Env) -> None:
    sid, conn = await _compacting_session(env)
    watcher = Watcher()
    queued = await env.submit(sid, "after compaction", [watcher])
    assert queued.mode == "injected" and env.entry(sid).state.queue != ()
    conn.crash()  # type: ignore[attr-defined]
    # The queued follow-up runs on a fresh connection instead of waiting forever.
    second = await env.driver.wait_connections(2)
    sent = await second.wait_sends(1)
    assert sent.message["id"] == queued.user_message_id
    second.emit_text("x", ["answered"])
    end = await watcher.wait_terminals(1)
    assert end.status == "success"
    await env.manager.wait_settled(f"agent-session:{sid}")
    assert not env.entry(sid).state.compacting


async def test_compaction_that_never_ends_settles_after_its_time_bound(env: Env) -> None:
    sid, _conn = await _compacting_session(env)
    bound = await env.timers.wait_armed()
    assert bound == env.host.compaction_bound
    env.timers.fire()
    with anyio.fail_after(5):
        await env.wait_for(lambda: not env.entry(sid).state.compacting)
    assert not env.host.is_busy(sid)
    assert any("did not end within" in line for line in env.entry(sid).log)


async def test_a_compaction_that_ends_cancels_its_time_bound(env: Env) -> None:
    sid, conn = await _compacting_session(env)
    await env.timers.wait_armed()
    conn.emit(CompactionComplete())  # type: ignore[attr-defined]
    await conn.wait_consumed()  # type: ignore[attr-defined]
    assert not env.entry(sid).state.compacting
    assert all(seconds != env.host.compaction_bound for seconds, _ in env.timers.sleepers)


def test_translator_settles_an_open_compaction_at_the_result() -> None:
    translator = fresh()
    events = run(translator, [status(status="compacting"), result()])
    assert [e for e in events if isinstance(e, CompactionStart | CompactionComplete)] == [
        CompactionStart(),
        CompactionComplete(),
    ]
    assert events.index(CompactionComplete()) < events.index(TurnComplete())


def test_translator_fails_a_compaction_on_compact_error_without_a_failed_result() -> None:
    translator = fresh()
    events = run(translator, [status(status="compacting"), status(compact_error="prompt too long")])
    assert events == [CompactionStart(), CompactionError("prompt too long")]
    # Exactly one end per compaction: the result settles nothing more.
    assert run(translator, [result()])[-1] == TurnComplete()
    assert not any(isinstance(e, CompactionComplete) for e in run(translator, [result()]))


def test_translator_fails_an_open_compaction_when_the_runtime_dies() -> None:
    translator = fresh()
    run(translator, [status(status="compacting")])
    events = translator.abandon_turn({"name": "DriverError", "message": "the CLI exited"})
    assert events[0] == CompactionError("the CLI exited")


def test_a_repeated_compacting_status_starts_one_compaction() -> None:
    translator = fresh()
    data = {"type": "system", "subtype": "status", "status": "compacting"}
    compacting = SystemMessage("status", data)
    assert run(translator, [compacting, compacting]) == [CompactionStart()]
