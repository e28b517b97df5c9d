"""Reference scenarios 29-38 (§12) with the real manager, dispatcher, SQLite and FakeDriver.

The fake driver plays the agent runtime; everything in front of it (dispatcher, provider, host,
reducer, stream manager, persistence listener, SQLite) is the real code.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from drupe.admission.base import Submit
from drupe.persistence.boot import reconcile_at_boot
from drupe.sessions.drivers.base import (
    CompactionAnchor,
    CompactionComplete,
    CompactionStart,
    ResumeToken,
)
from drupe.sessions.state import Idle, Transition, TurnExec
from drupe.testing.fake_driver import text_turn
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


async def test_scenario_32_follow_up_between_turns_is_queued_not_begun(env: Env) -> None:
    env.driver.steerable = False
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "one", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    second = await env.submit(sid, "two")
    assert second.mode == "injected"
    async with env.manager.conversation_lock(cid):
        conn.emit_text(first.placeholder_ids[0], ["done one"])
        await watcher.wait_terminals(1)
        await env.manager.wait_settled(cid)
        # The inter-turn window: nothing is live, but the host is launching "two".
        assert not env.manager.is_live(cid)
        assert env.host.is_busy(sid)
        third = await env.dispatcher.dispatch_locked(
            Submit(conversation_id=cid, parts=[{"type": "text", "text": "three"}])
        )
        assert third.mode == "injected" and third.placeholder_ids == ()
        assert not env.manager.is_live(cid)
    await conn.wait_sends(2)
    conn.emit_text("a2", ["done two"])
    await conn.wait_sends(3)
    assert [s.message["id"] for s in conn.sends[1:]] == [
        second.user_message_id,
        third.user_message_id,
    ]
    conn.emit_text("a3", ["done three"])
    await watcher.wait_terminals(3)
    await env.manager.wait_settled(cid)
    rows = await env.rows(sid)
    answers = {r.parent_id: text_of(r) for r in rows if r.role == "assistant"}
    assert answers == {
        first.user_message_id: "done one",
        second.user_message_id: "done two",
        third.user_message_id: "done three",
    }
    assert [t.is_conversation_done for t in watcher.terminals] == [False, False, True]


async def test_scenario_33_queued_follow_up_whose_model_was_deleted(env: Env) -> None:
    env.driver.steerable = False
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "one", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    await env.submit(sid, "two")
    await env.submit(sid, "three")
    await env.db.agents.update_agent(env.agent_id, model_id=None)
    conn.emit_text(first.placeholder_ids[0], ["done one"])
    end = await watcher.wait_terminals(2)
    assert watcher.terminals[0].is_conversation_done is False
    assert end.status == "error" and end.is_conversation_done is True
    assert end.error is not None and end.error["name"] == "AgentModelMissing"
    await env.wait_for(lambda: env.manager.get(cid) is None)
    rows = await env.rows(sid)
    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),
        ("user", "success"),
    ]
    assert env.entry(sid).state.queue == ()
    assert not env.host.is_busy(sid)
    assert len(conn.sends) == 1


async def test_scenario_34_compaction_settles_idle_and_anchor_reaches_the_live_turn(
    env: Env,
) -> None:
    sid = await env.new_session()
    assert await env.host.prime(sid)
    conn = await env.driver.wait_connections(1)
    conn.emit(CompactionStart("auto"))
    await conn.wait_consumed()
    assert env.host.is_busy(sid)
    # The SDK reports success without a boundary (twice): settles idle, idempotently.
    conn.emit(CompactionComplete(), CompactionComplete())
    await conn.wait_consumed()
    assert not env.host.is_busy(sid) and not env.entry(sid).state.compacting

    watcher = Watcher()
    first = await env.submit(sid, "go", [watcher])
    await conn.wait_sends(1)
    chunks = text_turn(first.placeholder_ids[0], ["before", " after"])
    conn.emit_chunks(chunks[:4])
    conn.emit(CompactionStart("auto"))
    anchor = CompactionAnchor(trigger="auto", completed_at=1.0, pre_tokens=900, post_tokens=100)
    conn.emit(CompactionComplete(anchor))
    conn.emit_chunks(chunks[4:])
    conn.complete()
    await watcher.wait_terminals(1)
    await env.manager.wait_settled(f"agent-session:{sid}")
    kinds = [e.chunk["type"] for e in watcher.events]
    assert "data-compaction-anchor" in kinds
    rows = await env.rows(sid)
    markers = [p for p in rows[1].parts if p["type"] == "data-compaction-anchor"]
    assert markers and markers[0]["data"]["preTokens"] == 900
    assert text_of(rows[1]) == "before after"
    assert not env.host.is_busy(sid)


async def test_scenario_35_error_row_keeps_the_token_and_a_cold_connect_hydrates_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with open_env(url) as env:
        sid = await env.new_session()
        watcher = Watcher()
        first = await env.submit(sid, "go", [watcher])
        conn = await env.driver.wait_connections(1)
        await conn.wait_sends(1)
        conn.emit(ResumeToken("tok-1"))
        conn.emit_chunks(text_turn(first.placeholder_ids[0], ["partial"])[:4])
        conn.fail("the runtime crashed")
        end = await watcher.wait_terminals(1)
        assert end.status == "error"
        await env.manager.wait_settled(f"agent-session:{sid}")
        rows = await env.rows(sid)
        assert rows[1].status == "error" and rows[1].runtime_resume_token == "tok-1"
        assert rows[0].runtime_resume_token is None
        assert await env.db.agents.latest_resume_token(sid) == "tok-1"
    # A new process: its first (cold) connect resumes from the persisted token.
    async with open_env(url) as env:
        watcher = Watcher()
        await env.submit(sid, "again", [watcher])
        await env.driver.wait_connects(1)
        assert env.driver.connect_inputs[0].resume_token == "tok-1"
        conn = await env.driver.wait_connections(1)
        await conn.wait_sends(1)
        conn.emit_text("x", ["ok"])
        await watcher.wait_terminals(1)
        await env.manager.wait_settled(f"agent-session:{sid}")


async def test_scenario_36_idle_ttl_closes_and_prewarms_park_consumed_on_match(
    env: Env,
) -> None:
    env.driver.prewarm_on_idle = True
    sid = await env.new_session(api_key="k1")
    cid = f"agent-session:{sid}"

    async def turn(text: str) -> None:
        watcher = Watcher()
        await env.submit(sid, text, [watcher])
        conn = await env.driver.wait_sent(len(env.driver.sent) + 1)
        conn.emit(ResumeToken(f"tok-{text}"))
        conn.emit_text("x", [text])
        await watcher.wait_terminals(1)
        await env.manager.wait_settled(cid)

    await turn("one")
    first = env.driver.last
    assert await env.timers.wait_armed() == 300.0
    env.timers.fire()
    await first.closed.wait()
    await env.wait_for(lambda: env.driver.parked != {})
    assert env.driver.idle_calls == [sid]
    warm = env.driver.parked[sid][1]
    # A rotated key is a volatile setting: the park still matches and is consumed once.
    await env.db.agents.update_session(sid, settings={"api_key": "k2"})
    await turn("two")
    assert env.driver.consumed == [warm] and env.driver.last is warm
    assert warm.sends[-1].message["parts"][0]["text"] == "two"

    # Idle again, then the model changes: the park does not match and is closed.
    await env.timers.wait_armed()
    env.timers.fire()
    await warm.closed.wait()
    await env.wait_for(lambda: sid in env.driver.parked)
    stale = env.driver.parked[sid][1]
    await env.db.agents.update_agent(env.agent_id, model_id="scripted:b")
    await turn("three")
    assert stale.closed.is_set() and env.driver.consumed == [warm]
    assert env.driver.last is not stale and env.driver.last.connect_input.model_id == "scripted:b"


async def test_scenario_37_model_edit_never_retargets_a_live_turn(env: Env) -> None:
    sid = await env.new_session()
    cid = f"agent-session:{sid}"
    watcher = Watcher()
    first = await env.submit(sid, "one", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    await env.db.agents.update_agent(env.agent_id, model_id="scripted:b")
    await env.host.agent_updated(env.agent_id)
    assert not conn.closed.is_set() and env.manager.is_live(cid)
    # A follow-up under the new model is queued, not redirected into the old-model turn.
    follow = await env.submit(sid, "two")
    assert conn.redirects == [] and len(env.entry(sid).state.queue) == 1
    conn.emit_text(first.placeholder_ids[0], ["one done"])
    await env.driver.wait_connections(2)
    assert conn.closed.is_set(), "the next turn reconnects for the new model"
    second = env.driver.last
    await second.wait_sends(1)
    assert second.connect_input.model_id == "scripted:b"
    assert second.sends[0].message["id"] == follow.user_message_id

    # A failed live reconcile pauses the live turn and closes the connection, keeps the queue.
    third = await env.submit(sid, "three")
    assert [r.message["id"] for r in second.redirects] == [third.user_message_id]
    second.redirect_result = False  # type: ignore[attr-defined]
    fourth = await env.submit(sid, "four")
    assert [f.user_message_id for f in env.entry(sid).state.queue] == [fourth.user_message_id]
    second.verdict = "failed"
    await env.host.agent_updated(env.agent_id)
    await second.closed.wait()
    end = await watcher.wait_terminals(2)
    assert end.status == "paused" and end.reason == "agent-policy-update-failed"
    third_conn = await env.driver.wait_connections(3)
    await third_conn.wait_sends(1)
    assert third_conn.sends[0].message["id"] == third.user_message_id
    third_conn.emit_text("x", ["three done"])
    await third_conn.wait_sends(2)
    assert third_conn.sends[1].message["id"] == fourth.user_message_id
    third_conn.emit_text("x", ["four done"])
    await watcher.wait_terminals(4)
    await env.manager.wait_settled(cid)
    rows = await env.rows(sid)
    answers = {r.parent_id: (r.status, text_of(r)) for r in rows if r.role == "assistant"}
    assert answers[follow.user_message_id][0] == "paused"
    assert answers[third.user_message_id] == ("success", "three done")
    assert answers[fourth.user_message_id] == ("success", "four done")


async def test_scenario_38_boot_reconciles_pending_rows_and_discards_tokens(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with open_env(url) as env:
        sid = await env.new_session()
        chat = await env.db.conversations.create(title="chat")
        from drupe.persistence.records import NewMessage, NewPlaceholder

        await env.db.messages.create_turn(
            chat.id,
            user_message=NewMessage(id="chat-u", parts=[{"type": "text", "text": "q"}]),
            parent_id=None,
            placeholders=[NewPlaceholder(message_id="chat-a", model_id="m")],
        )
        watcher = Watcher()
        first = await env.submit(sid, "go", [watcher])
        conn = await env.driver.wait_connections(1)
        await conn.wait_sends(1)
        conn.emit(ResumeToken("tok-crash"))
        await conn.wait_consumed()
        await env.db.agents.record_resume_token(sid, "tok-crash")
        # "Crash": the process dies with the rows pending (nothing settles them).
        env.manager.abort(f"agent-session:{sid}")
        await env.manager.wait_settled(f"agent-session:{sid}")
        await env.db.messages.set_pending(first.placeholder_ids[0], parts=[])
    async with open_env(url) as env:
        assert await reconcile_at_boot(env.db) == 2
        rows = await env.rows(sid)
        assert rows[1].status == "error" and rows[1].parts[-1]["data"]["name"] == "ServerRestart"
        chat_row = await env.db.messages.get("chat-a")
        assert chat_row is not None and chat_row.status == "error"
        assert await env.db.agents.latest_resume_token(sid) is None
        await env.submit(sid, "after boot", [Watcher()])
        await env.driver.wait_connects(1)
        assert env.driver.connect_inputs[0].resume_token is None
        conn = await env.driver.wait_connections(1)
        await conn.wait_sends(1)
        conn.emit_text("x", ["fresh"])
        await env.manager.wait_settled(f"agent-session:{sid}")
