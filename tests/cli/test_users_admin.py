"""``drupe users share|unshare``, ``drupe audit``, and what ``drupe users`` changes beyond a row
(issue 20): the first admin adopts the rows from before identity, disabling ends sessions, the
last admin stays, and every change is audited with the actor ``cli`` and no secret. A real
SQLite database in ``--data-dir``."""

from __future__ import annotations

from pathlib import Path

import anyio
from typer.testing import CliRunner

from drupe.cli.main import app
from drupe.persistence.db import open_database

runner = CliRunner()
PASSWORD = "a long enough password"


def drupe(data_dir: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--data-dir", str(data_dir)], input=stdin)
    return result.exit_code, result.output


def test_the_first_admin_adopts_the_rows_from_before_identity(tmp_path: Path) -> None:
    async def seed() -> str:
        async with open_database(data_dir=tmp_path) as db:
            return (await db.conversations.create(title="before identity")).id

    conversation_id = anyio.run(seed)
    code, out = drupe(tmp_path, "users", "create", "bob", "--password-stdin", stdin=PASSWORD)
    assert code == 0, out
    code, out = drupe(tmp_path, "users", "create", "root", "--admin", "--password-stdin",
                      stdin=PASSWORD)  # fmt: skip
    assert code == 0, out

    async def later() -> tuple[str | None, str | None, str | None]:
        async with open_database(data_dir=tmp_path) as db:
            root = await db.users.get_by_name("root")
            old = await db.conversations.get(conversation_id)
            newer = await db.conversations.create(title="unowned, later")
            return (
                root.id if root else None,
                old.owner_id if old else None,
                newer.id,
            )

    root_id, owner, newer_id = anyio.run(later)
    assert owner is not None and owner == root_id
    # A second admin adopts nothing.
    code, _ = drupe(tmp_path, "users", "create", "ann", "--admin", "--password-stdin",
                    stdin=PASSWORD)  # fmt: skip
    assert code == 0

    async def newer_owner() -> str | None:
        async with open_database(data_dir=tmp_path) as db:
            record = await db.conversations.get(newer_id)
            return record.owner_id if record else "missing"

    assert anyio.run(newer_owner) is None


def test_share_unshare_disable_and_the_audit_log(tmp_path: Path) -> None:
    for name, extra in (("root", ["--admin"]), ("alice", []), ("bob", [])):
        code, out = drupe(tmp_path, "users", "create", name, *extra, "--password-stdin",
                          stdin=PASSWORD)  # fmt: skip
        assert code == 0, out

    async def seed() -> tuple[str, str, str]:
        async with open_database(data_dir=tmp_path) as db:
            alice = await db.users.get_by_name("alice")
            bob = await db.users.get_by_name("bob")
            assert alice is not None and bob is not None
            conversation = await db.conversations.create(title="plans", owner_id=alice.id)
            cookie, _ = await db.auth_sessions.create(bob.id, method="password", ttl=3600)
            return conversation.id, bob.id, cookie

    conversation_id, bob_id, bob_cookie = anyio.run(seed)

    code, out = drupe(tmp_path, "users", "share", "bob", "conversation", conversation_id, "read")
    assert code == 0 and f"shared conversation {conversation_id} with bob (read)" in out
    code, out = drupe(tmp_path, "users", "share", "bob", "conversation", conversation_id, "write")
    assert code == 0 and "(write)" in out

    async def access() -> str | None:
        async with open_database(data_dir=tmp_path) as db:
            return await db.shares.access_of("conversation", conversation_id, bob_id)

    assert anyio.run(access) == "write"
    for args, says in (
        (("share", "bob", "conversation", conversation_id, "own"), "access must be one of"),
        (("share", "bob", "folder", conversation_id, "read"), "can be shared"),
        (("share", "bob", "conversation", "no-such-id", "read"), "no-such-id"),
        (("share", "nobody", "conversation", conversation_id, "read"), "unknown user 'nobody'"),
        (("share", "alice", "conversation", conversation_id, "read"), "owns this"),
    ):
        code, out = drupe(tmp_path, "users", *args)
        assert code == 1 and says in out, (args, out)
    code, out = drupe(tmp_path, "users", "unshare", "bob", "conversation", conversation_id)
    assert code == 0 and f"unshared conversation {conversation_id} with bob" in out
    assert anyio.run(access) is None
    code, out = drupe(tmp_path, "users", "unshare", "bob", "conversation", conversation_id)
    assert code == 0 and "was not shared" in out

    # The last admin stays; disabling bob ends his session at once.
    code, out = drupe(tmp_path, "users", "disable", "root")
    assert code == 1 and "last enabled admin" in out
    code, out = drupe(tmp_path, "users", "role", "root", "member")
    assert code == 1 and "last enabled admin" in out
    code, out = drupe(tmp_path, "users", "role", "bob", "owner")
    assert code == 1 and "admin or member" in out
    code, out = drupe(tmp_path, "users", "disable", "bob")
    assert code == 0 and "disabled bob" in out

    async def bob_session() -> object:
        async with open_database(data_dir=tmp_path) as db:
            return await db.auth_sessions.resolve(bob_cookie)

    assert anyio.run(bob_session) is None
    code, out = drupe(tmp_path, "users", "role", "alice", "admin")
    assert code == 0

    code, out = drupe(tmp_path, "audit", "--limit", "500")
    assert code == 0
    lines = out.strip().splitlines()
    actions = [line.split("  ")[1] for line in lines]
    assert actions == [  # newest first
        "user.role",
        "user.disable",
        "share.remove",
        "share.set",
        "share.set",
        "user.create",
        "user.create",
        "user.create",
    ]
    assert all(line.split("  ")[2] == "cli" for line in lines)
    assert '"sessionsEnded": 1' in lines[1] and '"to": "admin"' in lines[0]
    assert PASSWORD not in out and bob_cookie not in out
    code, out = drupe(tmp_path, "audit", "--action", "share.set", "--limit", "1")
    assert code == 0 and len(out.strip().splitlines()) == 1 and '"access": "write"' in out
    code, out = drupe(tmp_path, "audit", "--action", "nothing.like.this")
    assert code == 0 and "no audit events" in out
    code, out = drupe(tmp_path, "audit", "--limit", "0")
    assert code != 0
