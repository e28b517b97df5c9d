"""Cluster fencing of agent-session rows: the host's ``fence_for`` token is written into every
row of a session turn (provider, launcher, session backend), and a host that lost the
conversation writes nothing (real host, dispatcher, FakeDriver; SQLite and PostgreSQL)."""

from __future__ import annotations

from drupe.streaming.terminal import SAVE_FAILED
from drupe.testing.fake_driver import text_turn
from tests.sessions.support import Env, Watcher, text_of


async def test_every_row_of_a_session_turn_and_its_follow_up_is_fenced(env: Env) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    env.host.fence_for = {cid: 3}.get
    watcher = Watcher()
    first = await env.submit(sid, "build it", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["working"])[:4])
    await conn.wait_consumed()
    follow = await env.submit(sid, "also add tests")
    await conn.wait_redirects(1)
    conn.undelivered()  # the follow-up comes back and is queued: the launcher answers it
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["working"])[4:])
    conn.complete()
    await conn.wait_sends(2)
    conn.emit_text("a2", ["tests added"])
    await watcher.wait_terminals(2)
    await env.manager.wait_settled(cid)

    rows = await env.rows(sid)
    assert [(r.role, r.status, r.fence) for r in rows] == [
        ("user", "success", 3),
        ("assistant", "success", 3),
        ("user", "success", 3),
        ("assistant", "success", 3),
    ]
    assert rows[2].id == follow.user_message_id and text_of(rows[3]) == "tests added"


async def test_a_host_that_lost_the_conversation_writes_nothing(env: Env) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    env.host.fence_for = {cid: 1}.get
    watcher = Watcher()
    turn = await env.submit(sid, "build it", [watcher])
    answer = turn.placeholder_ids[0]
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(answer, ["working"])[:4])
    await conn.wait_consumed()

    # Another node takes the conversation over with token 2 (this one was partitioned).
    assert await env.db.messages.take_over(cid, fence=2, reason="node lost") == [answer]
    taken = await env.db.messages.get(answer)
    assert taken is not None and (taken.status, taken.fence) == ("error", 2)

    conn.emit_chunks(text_turn(answer, ["working"])[4:])
    conn.complete()
    end = await watcher.wait_terminals(1)
    await env.manager.wait_settled(cid)

    assert await env.db.messages.get(answer) == taken
    assert (end.status, end.error) == ("error", SAVE_FAILED)
