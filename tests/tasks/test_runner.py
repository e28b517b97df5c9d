"""The schedule runner on a manual clock, with the real manager, database and fake driver.

Each fire runs a real headless agent-session turn; the test plays the runtime (``FakeDriver``).
Heartbeats of an agent without a workspace are used where only the firing matters: each of
their runs ends at once as ``Skipped (workspace missing)``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio

from drupe.persistence.db import open_database
from drupe.tasks.runner import MISSED_RESULT
from drupe.tasks.service import TaskService
from tests.persistence.conftest import Target
from tests.tasks.support import START, TasksEnv, open_tasks, reuse_service

HOUR = timedelta(hours=1)


async def _answer(tasks: TasksEnv, run_id: str, sends: int, words: list[str]) -> None:
    run = await tasks.service.wait_started(run_id)
    conn = await tasks.env.driver.wait_sent(sends)
    assert run.message_id is not None
    conn.emit_text(run.message_id, words)


async def test_cron_fires_at_the_local_time_across_a_dst_change(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent,
        name="morning",
        prompt="summarise",
        trigger={"kind": "cron", "expr": "0 9 * * *", "timezone": "Europe/Berlin"},
    )
    first = datetime(2026, 3, 28, 8, 0, tzinfo=UTC)  # 09:00 CET
    second = datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 CEST, the day DST starts
    assert schedule.next_run_at == first
    await tasks.fire_at(first - timedelta(minutes=1))
    assert await tasks.runs(schedule.id) == []
    await tasks.fire_at(first)
    [run] = await tasks.runs(schedule.id)
    assert run.scheduled_for == first and run.kind == "scheduled"
    await _answer(tasks, run.id, 1, ["good", " morning"])
    assert (await tasks.wait_run(run.id)).result == "good morning"
    assert (await tasks.store.get(schedule.id)).next_run_at == second
    await tasks.fire_at(second)
    runs = await tasks.runs(schedule.id)
    assert [r.scheduled_for for r in runs] == [first, second]
    await _answer(tasks, runs[1].id, 2, ["again"])
    assert (await tasks.wait_run(runs[1].id)).status == "completed"


async def test_an_interval_fires_on_its_grid(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="hourly", prompt="check", trigger={"kind": "interval", "seconds": 3600}
    )
    assert schedule.next_run_at == START + HOUR
    await tasks.fire_at(START + HOUR + timedelta(seconds=3))
    [run] = await tasks.runs(schedule.id)
    assert run.scheduled_for == START + HOUR
    await _answer(tasks, run.id, 1, ["ok"])
    assert (await tasks.wait_run(run.id)).status == "completed"
    assert (await tasks.store.get(schedule.id)).next_run_at == START + 2 * HOUR


async def test_a_one_shot_fires_once(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    at = START + timedelta(minutes=10)
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="once", prompt="do it", trigger={"kind": "once", "at": at.isoformat()}
    )
    await tasks.fire_at(at)
    [run] = await tasks.runs(schedule.id)
    await _answer(tasks, run.id, 1, ["done"])
    assert (await tasks.wait_run(run.id)).result == "done"
    assert (await tasks.store.get(schedule.id)).next_run_at is None
    await tasks.fire_at(at + 3 * HOUR)
    assert len(await tasks.runs(schedule.id)) == 1


async def test_missed_runs_follow_each_policy_and_a_restart_never_fires_twice(
    target: Target,
) -> None:
    async with open_tasks(
        target.url, connect_args=target.connect_args, run_scheduler=False
    ) as tasks:
        agent = await tasks.agent()  # no workspace: every heartbeat run ends at once, skipped
        skip = await tasks.service.create_schedule(
            agent_id=agent,
            name="skip",
            prompt="-",
            kind="heartbeat",
            trigger={"kind": "interval", "seconds": 3600},
            missed_policy="skip",
        )
        once = await tasks.service.create_schedule(
            agent_id=agent,
            name="once",
            prompt="-",
            kind="heartbeat",
            trigger={"kind": "interval", "seconds": 3600},
            missed_policy="run-once",
        )
        # Down from START to START + 3h30: the 1h, 2h and 3h occurrences are missed.
        tasks.clock.set(START + 3 * HOUR + timedelta(minutes=30))
        async with reuse_service(tasks) as first_boot:
            await first_boot.runner.wait_ticks(1)
            for run in await tasks.store.list_runs():
                await first_boot.wait_run(run.id)
        skipped = await tasks.runs(skip.id)
        ran = await tasks.runs(once.id)
        assert [(r.status, r.result) for r in skipped] == [("skipped", MISSED_RESULT)]
        assert [(r.status, r.result, r.scheduled_for) for r in ran] == [
            ("skipped", "Skipped (workspace missing)", START + 3 * HOUR)
        ]
        for schedule in (skip, once):
            assert (await tasks.store.get(schedule.id)).next_run_at == START + 4 * HOUR
        async with reuse_service(tasks) as second_boot:  # a restart: nothing is due again
            await second_boot.runner.wait_ticks(1)
        assert len(await tasks.runs(skip.id)) == 1 and len(await tasks.runs(once.id)) == 1


async def test_two_runners_on_one_database_fire_each_occurrence_once(target: Target) -> None:
    async with (
        open_tasks(target.url, connect_args=target.connect_args, run_scheduler=False) as tasks,
        open_database(target.url, connect_args=target.connect_args) as second_db,
    ):
        agent = await tasks.agent()
        schedule = await tasks.service.create_schedule(
            agent_id=agent,
            name="beat",
            prompt="-",
            kind="heartbeat",
            trigger={"kind": "interval", "seconds": 3600},
        )
        deps_b = type(tasks.service.deps)(**{**_fields(tasks.service.deps), "db": second_db})
        async with reuse_service(tasks) as a, TaskService(deps_b, poll_interval=HOUR) as b:
            for k in range(1, 4):
                await a.runner.wait_napping()
                await b.runner.wait_napping()
                ticks = (a.runner.ticks, b.runner.ticks)
                tasks.clock.set(START + k * HOUR)
                await a.runner.wait_ticks(ticks[0] + 1)
                await b.runner.wait_ticks(ticks[1] + 1)
                for run in await tasks.store.list_runs(schedule_id=schedule.id):
                    await a.wait_run(run.id)
                    await b.wait_run(run.id)
            assert a.runner.fires + b.runner.fires == 3
        runs = await tasks.runs(schedule.id)
        assert [r.scheduled_for for r in runs] == [START + k * HOUR for k in range(1, 4)]


async def test_concurrent_claims_of_one_occurrence_have_one_winner(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="race", prompt="-", trigger={"kind": "interval", "seconds": 3600}
    )
    await tasks.service.pause(schedule.id)
    await tasks.store.update(schedule.id, enabled=True)  # enabled, runner not woken
    due = schedule.next_run_at
    results: list[bool] = []

    async def claim() -> None:
        results.append(
            await tasks.store.claim(schedule.id, expected=due, next_run_at=due + HOUR, now=due)
        )

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(claim)
    assert sorted(results) == [False, False, False, False, True]


def _fields(deps: object) -> dict[str, object]:
    return {name: getattr(deps, name) for name in deps.__slots__}  # type: ignore[attr-defined]


async def test_edits_pause_and_resume_recompute_the_next_fire_from_now(tasks: TasksEnv) -> None:
    agent = await tasks.agent()
    every = {"kind": "interval", "seconds": 3600}
    schedule = await tasks.service.create_schedule(
        agent_id=agent, name="e", prompt="p", trigger=every
    )
    tasks.clock.set(START + timedelta(minutes=20))
    same = await tasks.service.update_schedule(schedule.id, trigger=every, prompt="q")
    assert same.next_run_at == START + HOUR and same.prompt == "q"  # the phase is kept
    changed = await tasks.service.update_schedule(
        schedule.id, trigger={"kind": "interval", "seconds": 7200}
    )
    assert changed.next_run_at == START + timedelta(minutes=20) + 2 * HOUR
    paused = await tasks.service.pause(schedule.id)
    assert paused.enabled is False
    assert (await tasks.service.pause(schedule.id)).updated_at == paused.updated_at  # idempotent
    tasks.clock.set(START + 5 * HOUR)
    resumed = await tasks.service.resume(schedule.id)
    assert resumed.enabled is True
    # the 2 h grid from 12:20: 14:20, 16:20, then 18:20 is the first after 17:00
    assert resumed.next_run_at == START + 6 * HOUR + timedelta(minutes=20)
    tasks.clock.set(START + 5 * HOUR + timedelta(minutes=1))
    await tasks.service.runner.tick()  # a pass now: nothing is due
    assert await tasks.runs(schedule.id) == []  # nothing missed while paused is made up
