"""Scheduled and background runs act as their task's owner (issue 20, step 8): the session a
run makes is the owner's, the owner reads it, another member does not; a task whose owner may
not use its agent (not theirs, not shared) fails; a disabled owner's task does not run."""

from __future__ import annotations

from drupe.admission.principal import Principal
from drupe.errors import UnknownConversationError
from drupe.persistence.users import UserRecord
from tests.identity.conftest import Site


def _principal(user: UserRecord) -> Principal:
    return Principal(user_id=user.id, name=user.name, role=user.role)


async def _user(site: Site, name: str) -> UserRecord:
    user = await site.runtime.db.users.get_by_name(name)
    assert user is not None
    return user


async def test_a_background_run_is_its_owners(site: Site) -> None:
    alice = await site.sign_in("alice")
    agent = (
        await alice.post(
            "/api/agents",
            json={"name": "a", "driverType": "inprocess", "modelId": "scripted:echo"},
        )
    ).json()
    started = await alice.post(f"/api/agents/{agent['id']}/runs", json={"prompt": "hello"})
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]
    tasks = site.runtime.tasks
    assert tasks is not None
    run = await tasks.wait_run(run_id)
    assert run.status == "completed", run
    assert run.session_id is not None
    session = await site.runtime.db.agents.get_session(run.session_id)
    assert session is not None and session.owner_id == (await _user(site, "alice")).id
    # Through the port: alice reads the run's conversation, bob cannot even see it.
    conversations = site.runtime.conversations
    rows = await conversations.messages(
        _principal(await _user(site, "alice")), session.conversation_id
    )
    assert [r.role for r in rows] == ["user", "assistant"]
    bob = await site.sign_in("bob")
    assert (await bob.get(f"/api/runs/{run_id}")).status_code == 404
    try:
        await conversations.messages(_principal(await _user(site, "bob")), session.conversation_id)
    except UnknownConversationError:
        pass
    else:
        raise AssertionError("bob read alice's run")


async def test_a_task_on_an_agent_its_owner_may_not_use_fails(site: Site) -> None:
    alice = await site.sign_in("alice")
    agent = (
        await alice.post(
            "/api/agents",
            json={"name": "a", "driverType": "inprocess", "modelId": "scripted:echo"},
        )
    ).json()
    bob = await _user(site, "bob")
    tasks = site.runtime.tasks
    assert tasks is not None
    # A schedule of bob's on alice's agent (as if made before the agent was unshared).
    schedule = await site.runtime.db.schedules.create(
        agent_id=agent["id"],
        name="bob's",
        prompt="p",
        trigger={"kind": "interval", "seconds": 3600},
        timeout_minutes=1,
        session_mode="fresh",
        deliver_to=[],
        missed_policy="skip",
        enabled=False,
        owner_id=bob.id,
    )
    run = await tasks.wait_run((await tasks.run_now(schedule.id)).id)
    assert run.status == "failed" and run.error == f"Agent not found: {agent['id']}"
    # Shared with bob, the same task runs, as bob.
    await site.runtime.db.shares.share("agent", agent["id"], bob.id, "read")
    run = await tasks.wait_run((await tasks.run_now(schedule.id)).id)
    assert run.status == "completed", run
    assert run.session_id is not None
    session = await site.runtime.db.agents.get_session(run.session_id)
    assert session is not None and session.owner_id == bob.id
    # A disabled owner's task does not run.
    await site.runtime.db.users.set_disabled("bob")
    run = await tasks.wait_run((await tasks.run_now(schedule.id)).id)
    assert run.status == "failed" and "owner is disabled" in (run.error or "")
