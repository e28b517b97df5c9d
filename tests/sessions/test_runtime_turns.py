"""Issue 8 point 2: a turn the runtime starts by itself (the CLI reporting a background
subagent) gets its own assistant row (no user row), is streamed to subscribers and persisted,
under the same busy and queue rules as any turn."""

from __future__ import annotations

import logging

import pytest

from drupe.sessions.drivers.base import RuntimeTurnStart, TurnComplete
from drupe.sessions.state import Idle
from drupe.testing.fake_driver import text_turn
from tests.sessions.support import Env, Watcher, text_of


async def test_a_runtime_initiated_turn_gets_its_own_streamed_and_persisted_row(
    env: Env,
) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    first = await env.submit(sid, "look into it in the background")
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_text(first.placeholder_ids[0], ["started a background task"])
    await env.manager.wait_settled(cid)
    await env.wait_for(lambda: env.entry(sid).state.execution == Idle())

    # The runtime reports the subagent's result in a turn of its own.
    conn.emit(RuntimeTurnStart())
    conn.emit_chunks(text_turn("ignored", ["the subagent", " found 3 bugs"])[1:-1])
    await conn.wait_consumed()
    assert env.host.is_busy(sid)
    # A follow-up meanwhile waits for its turn (busy rules), and its subscriber sees the
    # runtime turn's answer streamed, then its own.
    watcher = Watcher()
    follow = await env.submit(sid, "thanks, fix them", [watcher])
    assert follow.mode == "injected"
    await watcher.wait_text("found 3 bugs")
    conn.complete()
    second = await conn.wait_sends(2)
    assert second.message["id"] == follow.user_message_id
    conn.emit_text("x", ["fixed"])
    await watcher.wait_terminals(2)
    await env.manager.wait_settled(cid)
    await env.wait_for(lambda: not env.host.is_busy(sid))

    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("assistant", "success"),  # the runtime's own turn: no user row above it
        ("user", "success"),
        ("assistant", "success"),
    ]
    _u1, a1, runtime, u2, a2 = rows
    assert runtime.parent_id == a1.id
    assert text_of(runtime) == "the subagent found 3 bugs"
    assert u2.id == follow.user_message_id and a2.parent_id == u2.id
    assert text_of(a2) == "fixed"
    assert [t.status for t in watcher.terminals] == ["success", "success"]
    assert len(conn.sends) == 2  # the runtime turn sent nothing


async def test_a_runtime_turn_that_starts_while_the_previous_turn_closes_is_kept(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 23.1: the CLI begins its own turn right after its result, while the host still
    persists the turn that result ended. The runtime turn waits, buffered, and becomes the
    next turn (its own row, streamed to the subscriber that stayed) once the session is idle;
    a follow-up submitted meanwhile is answered after it."""
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "look into it in the background", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    # One burst, read by the host before persistence can confirm the first turn.
    conn.emit_text(first.placeholder_ids[0], ["started a background task"])
    conn.emit(RuntimeTurnStart())
    conn.emit_chunks(text_turn("ignored", ["the subagent", " found 3 bugs"])[1:-1])
    conn.complete()
    await conn.wait_consumed()
    follow = await env.submit(sid, "thanks, fix them")
    second = await conn.wait_sends(2)
    assert second.message["id"] == follow.user_message_id
    conn.emit_text("x", ["fixed"])
    await watcher.wait_terminals(3)
    await env.manager.wait_settled(cid)
    await env.wait_for(lambda: not env.host.is_busy(sid))

    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),  # submitted while the runtime's turn waited
        ("assistant", "success"),  # the runtime's own turn, after the first answer
        ("assistant", "success"),
    ]
    _u1, a1, u2, runtime, a2 = rows
    assert text_of(a1) == "started a background task"
    assert runtime.parent_id == a1.id and text_of(runtime) == "the subagent found 3 bugs"
    assert u2.id == follow.user_message_id and a2.parent_id == u2.id
    # The subscriber of the first turn stayed for the runtime's turn and saw it streamed.
    assert [t.status for t in watcher.terminals] == ["success", "success", "success"]
    assert "the subagent found 3 bugs" in "".join(watcher.texts())
    assert not [line for line in env.entry(sid).log if "invalid" in line or "dropped" in line]
    assert not [r for r in caplog.records if r.levelname == "WARNING" and "session" in r.msg]


async def test_an_anomaly_of_the_session_host_is_logged_at_warning(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk the runtime sends with no turn to take it is lost: WARNING, not INFO."""
    sid = await env.new_session()
    first = await env.submit(sid, "go")
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_text(first.placeholder_ids[0], ["done"])
    await env.manager.wait_settled(f"agent-session:{sid}")
    await env.wait_for(lambda: env.entry(sid).state.execution == Idle())
    with caplog.at_level(logging.INFO, logger="drupe.sessions.host"):
        conn.emit_chunks([{"type": "text-delta", "id": "t", "delta": "stray"}])
        conn.emit(TurnComplete())
        await conn.wait_consumed()
    levels = {r.getMessage().split(": ", 1)[1]: r.levelname for r in caplog.records}
    assert levels == {
        "dropped 1 chunk(s) (no live turn)": "WARNING",
        "invalid RuntimeTerminal: a runtime terminal without a live turn": "WARNING",
    }
