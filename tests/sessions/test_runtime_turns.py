"""Issue 8 point 2: a turn the runtime starts by itself (the CLI reporting a background
subagent) gets its own assistant row (no user row), is streamed to subscribers and persisted,
under the same busy and queue rules as any turn."""

from __future__ import annotations

from drupe.sessions.drivers.base import RuntimeTurnStart
from drupe.sessions.state import Idle, TurnExec
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


async def test_a_runtime_turn_on_a_busy_session_is_refused_visibly(env: Env) -> None:
    sid = await env.new_session()
    first = await env.submit(sid, "go")
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit(RuntimeTurnStart())  # while a user turn runs: not a second turn
    await conn.wait_consumed()
    execution = env.entry(sid).state.execution
    assert isinstance(execution, TurnExec) and not execution.turn.runtime
    assert any("runtime-initiated turn on a busy session" in line for line in env.entry(sid).log)
    conn.emit_text(first.placeholder_ids[0], ["done"])
    await env.manager.wait_settled(f"agent-session:{sid}")
    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [("user", "success"), ("assistant", "success")]
