"""Reference scenarios 29-38 (§12) with the real manager, dispatcher, SQLite and FakeDriver.

The fake driver plays the agent runtime; everything in front of it (dispatcher, provider, host,
reducer, stream manager, persistence listener, SQLite) is the real code.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from drupe.sessions.drivers.base import (
    ChunkEvent,
    CompactionAnchor,
    CompactionComplete,
    CompactionStart,
    ResumeToken,
)
from drupe.sessions.state import Idle, Transition, TurnExec
from drupe.testing.fake_driver import FakeDriver, text_turn
from tests.sessions.support import Env, Watcher, open_env, text_of


async def test_scenario_29_idle_session_turn_one_connect_token_and_one_send(env: Env) -> None:
    sid = await env.new_session()
    await env.db.agents.record_resume_token(sid, "tok-persisted")
    env.driver.gate = anyio.Event()
    watcher = Watcher()
    async with anyio.create_task_group() as tg:
        tg.start_soon(env.host.prime, sid)
        await env.driver.wait_connects(1)
        result = await env.submit(sid, "hello", [watcher])
        rows = await env.rows(sid)
        assert [(r.role, r.status) for r in rows] == [("user", "success"), ("assistant", "pending")]
        assert rows[1].parent_id == rows[0].id == result.user_message_id
        env.driver.gate.set()
    conn = env.driver.last
    sent = await conn.wait_sends(1)
    assert sent.message["parts"] == [{"type": "text", "text": "hello"}]
    assert not sent.system_reminder
    conn.emit_text(result.placeholder_ids[0], ["hi", " there"])
    await watcher.wait_terminals(1)
    await env.manager.wait_settled(f"agent-session:{sid}")
    assert env.driver.connects == 1
    assert env.driver.connect_inputs[0].resume_token == "tok-persisted"
    assert len(conn.sends) == 1
    rows = await env.rows(sid)
    assert rows[1].status == "success" and text_of(rows[1]) == "hi there"
    assert not env.host.is_busy(sid)


async def test_scenario_30_live_follow_up_is_redirected_then_undelivered_requeued(
    env: Env,
) -> None:
    sid = await env.new_session()
    watcher = Watcher()
    first = await env.submit(sid, "build it", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["working"])[:4])
    await conn.wait_consumed()
    follow = await env.submit(sid, "also add tests")
    assert follow.mode == "injected"
    steer = await conn.wait_redirects(1)
    assert steer.system_reminder is True
    assert steer.message["id"] == follow.user_message_id
    entry = env.entry(sid)
    assert entry.state.queue == ()
    assert env.manager.is_live(f"agent-session:{sid}")
    # The turn ends before the runtime injected the steer: it comes back and is queued.
    conn.undelivered()
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["working"])[4:])
    conn.complete()
    second = await conn.wait_sends(2)
    assert second.message["id"] == follow.user_message_id and second.system_reminder is True
    conn.emit_text("a2", ["tests added"])
    await watcher.wait_terminals(2)
    assert [t.is_conversation_done for t in watcher.terminals] == [False, True]
    await env.manager.wait_settled(f"agent-session:{sid}")
    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),
        ("assistant", "success"),
    ]
    assert rows[3].parent_id == follow.user_message_id
    assert text_of(rows[3]) == "tests added"


async def test_scenario_31_steer_boundary_rolls_a1a_u2_a2(env: Env) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "write the parser", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["parsing"])[:5])
    await conn.wait_consumed()
    follow = await env.submit(sid, "use a stack")
    await conn.wait_redirects(1)
    # Hold A1a's terminal in the subscriber so the chunks after the boundary must be buffered.
    watcher.hold = anyio.Event()
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["parsing"])[5:])
    conn.boundary()
    after = text_turn("a2", ["with", " a", " stack"])
    conn.emit_chunks(after[:4])
    await watcher.wait_terminals(1)
    await conn.wait_consumed()
    execution = env.entry(sid).state.execution
    assert isinstance(execution, Transition)
    assert [c["type"] for c in execution.buffer] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
    ]
    assert watcher.terminals[0].status == "success"
    assert watcher.terminals[0].is_conversation_done is False
    watcher.hold.set()
    await env.wait_for(
        lambda: (
            isinstance(env.entry(sid).state.execution, TurnExec)
            and env.entry(sid).state.execution.phase == "open"
        )
    )  # type: ignore[union-attr]
    conn.emit_chunks(after[4:])
    conn.complete()
    await watcher.wait_terminals(2)
    await env.manager.wait_settled(cid)
    assert watcher.terminals[1].is_conversation_done is True
    assert len(conn.sends) == 1, "A2 is pre-admitted: the steer is never re-sent"
    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),
        ("assistant", "success"),
    ]
    u1, a1a, u2, a2 = rows
    assert a1a.parent_id == u1.id and u2.id == follow.user_message_id
    assert a2.parent_id == u2.id
    assert text_of(a1a) == "parsing"
    assert text_of(a2) == "with a stack"
    # The subscriber saw A1a then A2, the buffered chunks exactly once, in order.
    assert watcher.texts() == ["parsing", "with", " a", " stack"]
    assert env.entry(sid).state.execution == Idle()
