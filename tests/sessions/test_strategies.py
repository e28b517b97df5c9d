"""Issue 8, point 8 for agent sessions: a refused double-text leaves the live turn untouched.

An agent session states ``enqueue`` and ``reject``; ``interrupt`` and ``rollback`` are refused
before anything happens (the running turn keeps streaming and ends with its whole text, and the
refused message is not stored). ``enqueue`` queues or redirects the message into the live turn.
"""

from __future__ import annotations

import pytest

from drupe.admission.base import Strategy, Submit
from drupe.errors import AdmissionError
from drupe.testing.fake_driver import text_turn
from tests.sessions.support import Env, Watcher, text_of

AGAIN = [{"type": "text", "text": "and again"}]


@pytest.mark.parametrize(
    ("strategy", "reason"),
    [("interrupt", "unsupported"), ("rollback", "unsupported"), ("reject", "busy")],
)
async def test_a_refused_double_text_leaves_the_live_session_turn_untouched(
    env: Env, strategy: Strategy, reason: str
) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "build it", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    chunks = text_turn(first.placeholder_ids[0], ["working", " hard"])
    conn.emit_chunks(chunks[:4])
    await conn.wait_consumed()
    stream = env.manager.get(cid)
    before = [(r.role, r.status) for r in await env.rows(sid)]
    with pytest.raises(AdmissionError) as info:
        await env.dispatcher.dispatch(Submit(conversation_id=cid, parts=AGAIN, strategy=strategy))
    assert info.value.reason == reason
    assert env.manager.get(cid) is stream and env.manager.is_live(cid)
    assert [(r.role, r.status) for r in await env.rows(sid)] == before
    conn.emit_chunks(chunks[4:])
    conn.complete()
    await watcher.wait_terminals(1)
    assert [t.status for t in watcher.terminals] == ["success"]
    await env.manager.wait_settled(cid)
    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [("user", "success"), ("assistant", "success")]
    assert text_of(rows[1]) == "working hard"


async def test_enqueue_on_a_live_session_stores_the_message_and_keeps_the_turn(env: Env) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "build it", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["working"])[:4])
    await conn.wait_consumed()
    stream = env.manager.get(cid)
    queued = await env.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=AGAIN, strategy="enqueue")
    )
    assert queued.mode == "injected" and queued.user_message_id is not None
    assert env.manager.get(cid) is stream and env.manager.is_live(cid)
    assert stream is not None and all(e.abort_reason is None for e in stream.executions.values())
