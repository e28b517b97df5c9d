"""``UserStore.change`` on SQLite and PostgreSQL (issue 20): a role or the disabled flag, and
never a server without an enabled admin, even when two admins demote each other at once."""

from __future__ import annotations

import anyio
import pytest

from drupe.errors import NotFoundError, ValidationError
from drupe.persistence.db import Database


async def test_a_change_reports_before_and_after_and_keeps_an_admin(database: Database) -> None:
    users = database.users
    await users.create("ann", password=None, role="admin")
    await users.create("ben", password=None)
    before, after = await users.change("ben", role="admin")
    assert (before.role, after.role, after.disabled) == ("member", "admin", False)
    before, after = await users.change("ben", disabled=True)
    assert (before.disabled, after.disabled, after.role) == (False, True, "admin")
    with pytest.raises(ValidationError, match="'ann' is the last enabled admin"):
        await users.change("ann", disabled=True)
    with pytest.raises(ValidationError, match="last enabled admin"):
        await users.change("ann", role="member")
    with pytest.raises(ValidationError, match="role must be one of"):
        await users.change("ann", role="owner")  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        await users.change("nobody", role="admin")
    assert (await users.get_by_name("ann")).role == "admin"  # type: ignore[union-attr]
    _, ben = await users.change("ben", disabled=False)
    _, ann = await users.change("ann", role="member", disabled=True)  # ben is an admin again
    assert (ann.role, ann.disabled, ben.role) == ("member", True, "admin")


async def test_two_admins_demoting_each_other_at_once_leave_one(database: Database) -> None:
    users = database.users
    await users.create("ann", password=None, role="admin")
    await users.create("ben", password=None, role="admin")
    for _ in range(10):  # without the locks, Postgres lets both through almost every round
        results: list[object] = []

        async def attempt(name: str, results: list[object]) -> None:
            try:
                results.append(await users.change(name, role="member"))
            except ValidationError as err:
                results.append(err)

        async with anyio.create_task_group() as group:
            group.start_soon(attempt, "ann", results)
            group.start_soon(attempt, "ben", results)
        refused = [r for r in results if isinstance(r, ValidationError)]
        assert len(results) == 2 and len(refused) == 1, results
        admins = [u.name for u in await users.list_users() if u.role == "admin"]
        assert len(admins) == 1
        await users.change("ben" if admins == ["ann"] else "ann", role="admin")
