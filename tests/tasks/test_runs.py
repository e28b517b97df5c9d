"""One task run end to end: sentinel settle, delivery port, busy skip, timeout, heartbeat skips.

Real manager, dispatcher, agent-session host and database; the test plays the runtime through
the ``FakeDriver`` and time through the ``ManualClock``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from drupe.tasks.delivery import DeliveryTarget
from drupe.tasks.run import BUSY_RESULT
from drupe.testing.fake_driver import FakeDriver, text_turn
from tests.persistence.conftest import Target
from tests.sessions.support import Watcher, text_of
from tests.tasks.support import TasksEnv, open_tasks

CHATS = [{"channel": "telegram-main", "chat": "42"}, {"channel": "slack-ops", "chat": "C7"}]
TARGETS = [DeliveryTarget("telegram-main", "42"), DeliveryTarget("slack-ops", "C7")]
DAILY = {"kind": "interval", "seconds": 86400}


async def test_the_result_is_delivered_once_to_each_subscribed_chat(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="digest", prompt="digest please", trigger=DAILY, deliver_to=CHATS
    )
    assert schedule.last_run_at is None
    run = await tasks.service.wait_started((await tasks.service.run_now(schedule.id)).id)
    # A manual run is the task's last run (the schedules page shows it).
    assert (await tasks.store.get(schedule.id)).last_run_at == run.started_at
    conn = await tasks.env.driver.wait_sent(1)
    sent = conn.sends[0]
    assert sent.headless is True
    assert sent.message["parts"] == [{"type": "text", "text": "digest please"}]
    assert run.message_id is not None
    conn.emit_chunks(text_turn(run.message_id, ["Hello ", "world"])[:4])
    conn.emit_chunks(
        [
            {"type": "reasoning-start", "id": "r"},
            {"type": "reasoning-delta", "id": "r", "delta": "hm"},
        ]
    )
    conn.emit_chunks(text_turn(run.message_id, ["Hello ", "world"])[4:])
    conn.complete()
    done = await tasks.wait_run(run.id)
    assert (done.status, done.result, done.error, done.kind) == (
        "completed",
        "Hello world",
        None,
        "manual",
    )
    assert done.duration_ms is not None and done.finished_at is not None
    assert tasks.sent.items == [(TARGETS[0], "Hello world"), (TARGETS[1], "Hello world")]
    assert done.conversation_id is not None
    stream = tasks.env.manager.get(done.conversation_id)
    kept = [] if stream is None else list(stream.listeners)
    assert not [lid for lid in kept if lid.startswith(("agent-task:", "task-delivery:"))]


async def test_a_failure_is_sent_as_one_task_failed_notice(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="digest", prompt="go", trigger=DAILY, deliver_to=CHATS[:1]
    )
    run = await tasks.service.wait_started((await tasks.service.run_now(schedule.id)).id)
    conn = await tasks.env.driver.wait_sent(1)
    assert run.message_id is not None
    conn.emit_chunks(text_turn(run.message_id, ["half"])[:4])
    tasks.clock.advance(3)
    conn.fail("the model is down")
    done = await tasks.wait_run(run.id)
    assert (done.status, done.error, done.result) == ("failed", "the model is down", "half")
    assert tasks.sent.items == [(TARGETS[0], "[Task failed] digest / 3s / the model is down")]


async def test_a_busy_sticky_session_is_skipped_untouched(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="sticky", prompt="go", trigger=DAILY, session_mode="sticky"
    )
    first = await tasks.service.wait_started((await tasks.service.run_now(schedule.id)).id)
    conn = await tasks.env.driver.wait_sent(1)
    sticky = (await tasks.store.get(schedule.id)).sticky_session_id
    assert sticky == first.session_id
    second = await tasks.wait_run((await tasks.service.run_now(schedule.id)).id)
    assert (second.status, second.result, second.session_id) == ("skipped", BUSY_RESULT, sticky)
    assert len(conn.sends) == 1 and not conn.redirects
    assert first.message_id is not None
    conn.emit_text(first.message_id, ["first"])
    assert (await tasks.wait_run(first.id)).result == "first"
    # Idle again: the next run continues the same session.
    third = await tasks.service.wait_started((await tasks.service.run_now(schedule.id)).id)
    assert third.session_id == sticky
    conn = await tasks.env.driver.wait_sent(2)
    assert third.message_id is not None
    conn.emit_text(third.message_id, ["third"])
    assert (await tasks.wait_run(third.id)).result == "third"


async def test_a_timeout_aborts_the_run_and_keeps_its_partial(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent,
        name="slow",
        prompt="go",
        trigger=DAILY,
        timeout_minutes=1,
        deliver_to=CHATS[:1],
    )
    run = await tasks.service.wait_started((await tasks.service.run_now(schedule.id)).id)
    conn = await tasks.env.driver.wait_sent(1)
    assert run.message_id is not None
    watcher = Watcher("wc:t")
    tasks.env.manager.attach(f"agent-session:{run.session_id}", watcher)
    conn.emit_chunks(text_turn(run.message_id, ["partial", " answer"])[:5])
    await watcher.wait_chunk("text-delta")
    await tasks.clock.wait_sleepers(2)  # the runner and the run's timeout
    tasks.clock.advance(60)
    done = await tasks.wait_run(run.id)
    assert (done.status, done.error) == ("failed", "Task timed out after 1 minute(s)")
    assert done.result == "partial answer"
    assert done.duration_ms == 60_000
    [_user, answer] = await tasks.env.rows(run.session_id or "")
    assert (answer.status, text_of(answer)) == ("paused", "partial answer")
    # Only the failure notice: the channel listener was removed before the abort.
    assert tasks.sent.items == [
        (TARGETS[0], "[Task failed] slow / 60s / Task timed out after 1 minute(s)")
    ]


async def test_a_cancel_stops_the_run_and_sends_nothing(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="c", prompt="go", trigger=DAILY, deliver_to=CHATS[:1]
    )
    run = await tasks.service.wait_started((await tasks.service.run_now(schedule.id)).id)
    conn = await tasks.env.driver.wait_sent(1)
    assert run.message_id is not None
    watcher = Watcher("wc:c")
    tasks.env.manager.attach(f"agent-session:{run.session_id}", watcher)
    conn.emit_chunks(text_turn(run.message_id, ["so far"])[:4])
    await watcher.wait_chunk("text-delta")
    assert await tasks.service.cancel_run(run.id) is True
    done = await tasks.wait_run(run.id)
    assert (done.status, done.result) == ("cancelled", "so far")
    assert tasks.sent.items == []
    assert await tasks.service.cancel_run(run.id) is False


async def test_heartbeat_skip_reasons_are_recorded(target: Target, tmp_path: Path) -> None:
    blind = FakeDriver(headless_runs=False)
    async with open_tasks(target.url, connect_args=target.connect_args, driver=blind) as tasks:
        agent = await tasks.agent(workspace=str(tmp_path))
        beat = await tasks.service.set_heartbeat(agent, enabled=True, interval_minutes=30)
        assert beat.kind == "heartbeat" and beat.name == f"heartbeat_{agent}"
        run = await tasks.wait_run((await tasks.service.run_now(beat.id)).id)
        assert (run.status, run.result) == ("skipped", "Skipped (capability)")

    async with open_tasks(target.url, connect_args=target.connect_args) as tasks:
        agent = await tasks.agent(workspace=str(tmp_path / "gone"))
        beat = await tasks.service.set_heartbeat(agent, enabled=True)
        run = await tasks.wait_run((await tasks.service.run_now(beat.id)).id)
        assert run.result == "Skipped (workspace missing)"

        await tasks.env.db.agents.update_agent(agent, workspace=str(tmp_path))
        reasons = []
        for content in (None, "  \n", "<!-- only a comment -->\n", "<!-- unterminated"):
            path = tmp_path / "heartbeat.md"
            path.unlink(missing_ok=True)
            if content is not None:
                path.write_text(content)
            run = await tasks.wait_run((await tasks.service.run_now(beat.id)).id)
            reasons.append((run.status, run.result))
        assert reasons == [("skipped", "Skipped (no file)")] * 4

        (tmp_path / "real.md").write_text("check the inbox")
        (tmp_path / "heartbeat.md").unlink()
        (tmp_path / "heartbeat.md").symlink_to(tmp_path / "real.md")
        run = await tasks.wait_run((await tasks.service.run_now(beat.id)).id)
        assert run.result == "Skipped (no file)"  # a symlink is refused

        (tmp_path / "heartbeat.md").unlink()
        (tmp_path / "heartbeat.md").write_text("<!-- list -->\n- check the inbox\n")
        run = await tasks.service.wait_started((await tasks.service.run_now(beat.id)).id)
        conn = await tasks.env.driver.wait_sent(1)
        prompt = conn.sends[0].message["parts"][0]["text"]
        assert prompt.startswith("[Heartbeat]\n") and prompt.endswith("- check the inbox")
        assert run.message_id is not None
        conn.emit_text(run.message_id, ["inbox empty"])
        assert (await tasks.wait_run(run.id)).result == "inbox empty"


async def test_an_unknown_agent_or_a_past_one_shot_is_refused(tasks: TasksEnv) -> None:
    import pytest

    from drupe.errors import ValidationError

    with pytest.raises(ValidationError, match="Agent not found: nope"):
        await tasks.service.create_schedule(agent_id="nope", name="x", prompt="y", trigger=DAILY)
    agent = await tasks.agent()
    past = (tasks.clock.now() - timedelta(minutes=1)).isoformat()
    with pytest.raises(ValidationError, match="in the past"):
        await tasks.service.create_schedule(
            agent_id=agent, name="x", prompt="y", trigger={"kind": "once", "at": past}
        )


async def test_a_queued_later_turn_does_not_inherit_the_task_listeners(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent,
        name="s",
        prompt="go",
        trigger=DAILY,
        deliver_to=CHATS[:1],
        session_mode="sticky",
    )
    run = await tasks.service.wait_started((await tasks.service.run_now(schedule.id)).id)
    conn = await tasks.env.driver.wait_sent(1)
    assert run.message_id is not None and run.session_id is not None
    tasks.env.driver.redirect_result = False  # the follow-up is queued as the next turn
    user = Watcher("wc:user")
    follow = await tasks.env.submit(run.session_id, "and then?", [user])
    assert follow.mode == "injected"
    conn.emit_text(run.message_id, ["task answer"])
    done = await tasks.wait_run(run.id)
    assert done.result == "task answer"
    second = await conn.wait_sends(2)
    assert second.message["parts"] == [{"type": "text", "text": "and then?"}]
    conn.emit_text("a2", ["user answer"])
    await user.wait_terminals(2)
    assert tasks.sent.items == [(TARGETS[0], "task answer")]


async def test_three_failed_runs_in_a_row_pause_the_schedule(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="flaky", prompt="go", trigger=DAILY
    )

    async def run_once(fail: bool) -> str:
        tasks.clock.advance(60)  # runs are ordered by their start time
        run = await tasks.service.wait_started((await tasks.service.run_now(schedule.id)).id)
        conn = tasks.env.driver.connections[-1]
        await conn.wait_sends(1)
        if fail:
            conn.fail("boom")
        else:
            assert run.message_id is not None
            conn.emit_text(run.message_id, ["fine"])
        return (await tasks.wait_run(run.id)).status

    outcomes = [await run_once(f) for f in (True, True, False, True, True)]
    assert outcomes == ["failed", "failed", "completed", "failed", "failed"]
    assert (await tasks.store.get(schedule.id)).enabled is True  # the success broke the chain
    assert await run_once(True) == "failed"
    assert (await tasks.store.get(schedule.id)).enabled is False
