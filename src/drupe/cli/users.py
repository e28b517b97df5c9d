"""``drupe users``: the people who sign in (issue 20), scripted by other tools, so exactly:

* ``drupe users create NAME [--admin] [--email E] --password-stdin``: the password is read from
  standard input (one line; never an argument, never echoed);
* ``drupe users list``, ``drupe users disable NAME``, ``drupe users role NAME admin|member``;
* ``drupe users token NAME [--name LABEL]``: a personal API token, printed once on the last
  line of standard output (only its hash is stored);
* ``drupe users share NAME conversation|agent ID read|write``, ``drupe users unshare NAME
  conversation|agent ID``;
* ``drupe audit [--limit N] [--action A]`` (``audit_command``): the audit log, newest first.

Creations, role changes, disables and shares are audited with the actor ``cli``; the first
admin created adopts the rows from before identity; the last enabled admin cannot be demoted or
disabled; disabling ends the user's sessions (``drupe.identity.user_admin``).

Each works on the database ``serve`` would use (``--data-dir``, ``--database-url``,
``DRUPE_DATA_DIR``). A refusal is one line on standard error and exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer

if TYPE_CHECKING:
    from drupe.persistence.db import Database

__all__ = ["audit_command", "users_app"]

users_app = typer.Typer(help="Users who sign in, their roles and tokens.", no_args_is_help=True)

_DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Where the SQLite database lives.")
]
_DatabaseUrl = Annotated[
    str | None,
    typer.Option("--database-url", help="SQLAlchemy URL (default: SQLite in the data dir)."),
]


def _with_db(database_url: str | None, data_dir: Path | None, action: Any) -> Any:
    """Run ``action(db)`` on the database ``serve`` would use; a refusal exits 1."""
    from drupe.cli.main import fail, settings_from_options
    from drupe.errors import DrupeError
    from drupe.persistence.db import open_database

    settings = settings_from_options(database_url=database_url, data_dir=data_dir)

    async def run() -> Any:
        async with open_database(settings.database_url, data_dir=settings.data_dir) as db:
            database: Database = db
            return await action(database)

    try:
        return anyio.run(run)
    except DrupeError as err:
        raise fail(str(err)) from err


@users_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The sign-in name.")],
    admin: Annotated[bool, typer.Option("--admin", help="An admin (default: a member).")] = False,
    email: Annotated[str | None, typer.Option("--email", help="The user's e-mail.")] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
    database_url: _DatabaseUrl = None,
    data_dir: _DataDir = None,
) -> None:
    """Create a user (the password comes on standard input with --password-stdin)."""
    from drupe.cli.main import console, fail

    if not password_stdin:
        raise fail("give the password on standard input with --password-stdin")
    from drupe.identity.user_admin import CLI_ACTOR, create_user

    password = sys.stdin.readline().rstrip("\r\n")
    user = _with_db(
        database_url,
        data_dir,
        lambda db: create_user(
            db, CLI_ACTOR, name, password=password, role="admin" if admin else "member", email=email
        ),
    )
    console.print(f"created {user.role} {user.name} ({user.id})", markup=False)


@users_app.command("list")
def list_users(database_url: _DatabaseUrl = None, data_dir: _DataDir = None) -> None:
    """List the users: name, role, state, e-mail, created."""
    from drupe.cli.main import console

    records = _with_db(database_url, data_dir, lambda db: db.users.list_users())
    if not records:
        console.print("no users; create one with: drupe users create NAME --password-stdin")
        return
    for user in records:
        state = "disabled" if user.disabled else "active"
        created = user.created_at.isoformat(timespec="seconds")
        console.print(
            f"{user.name}  {user.role}  {state}  {user.email or '-'}  created {created}",
            markup=False,
            soft_wrap=True,
        )


@users_app.command("disable")
def disable(
    name: Annotated[str, typer.Argument(help="The user.")],
    database_url: _DatabaseUrl = None,
    data_dir: _DataDir = None,
) -> None:
    """Disable a user (it can no longer sign in; its sessions end, its tokens stop working)."""
    from drupe.cli.main import console
    from drupe.identity.user_admin import CLI_ACTOR, change_user

    user = _with_db(
        database_url, data_dir, lambda db: change_user(db, CLI_ACTOR, name, disabled=True)
    )
    console.print(f"disabled {user.name}", markup=False)


@users_app.command("role")
def role(
    name: Annotated[str, typer.Argument(help="The user.")],
    new_role: Annotated[str, typer.Argument(metavar="admin|member", help="The new role.")],
    database_url: _DatabaseUrl = None,
    data_dir: _DataDir = None,
) -> None:
    """Make a user an admin or a member."""
    from drupe.cli.main import console, fail
    from drupe.identity.user_admin import CLI_ACTOR, change_user

    if new_role not in ("admin", "member"):
        raise fail(f"the role is admin or member, not {new_role!r}")
    user = _with_db(
        database_url,
        data_dir,
        lambda db: change_user(
            db, CLI_ACTOR, name, role="admin" if new_role == "admin" else "member"
        ),
    )
    console.print(f"{user.name} is now {user.role}", markup=False)


@users_app.command("token")
def token(
    name: Annotated[str, typer.Argument(help="The user.")],
    label: Annotated[str, typer.Option("--name", help="What the token is for.")] = "token",
    database_url: _DatabaseUrl = None,
    data_dir: _DataDir = None,
) -> None:
    """Create a personal API token; it is printed once, on the last line."""
    from drupe.cli.main import console

    plaintext, record = _with_db(
        database_url, data_dir, lambda db: db.users.create_token(name, label)
    )
    console.print(f"created token {record.id} ({record.name}) for {name}", markup=False)
    console.print("Store it now, it is not shown again:")
    print(plaintext)


_Kind = Annotated[str, typer.Argument(metavar="conversation|agent", help="What is shared.")]
_Id = Annotated[str, typer.Argument(help="The conversation's or the agent's id.")]


@users_app.command("share")
def share(
    name: Annotated[str, typer.Argument(help="The user it is shared with.")],
    kind: _Kind,
    resource_id: _Id,
    access: Annotated[str, typer.Argument(metavar="read|write", help="What they may do.")],
    database_url: _DatabaseUrl = None,
    data_dir: _DataDir = None,
) -> None:
    """Share a conversation or an agent with a user, to read or to write."""
    from drupe.cli.main import console
    from drupe.identity.user_admin import CLI_ACTOR
    from drupe.identity.user_admin import share as share_with

    given = _with_db(
        database_url,
        data_dir,
        lambda db: share_with(db, CLI_ACTOR, kind, resource_id, name, access),
    )
    console.print(f"shared {kind} {resource_id} with {name} ({given.access})", markup=False)


@users_app.command("unshare")
def unshare(
    name: Annotated[str, typer.Argument(help="The user it was shared with.")],
    kind: _Kind,
    resource_id: _Id,
    database_url: _DatabaseUrl = None,
    data_dir: _DataDir = None,
) -> None:
    """Stop sharing a conversation or an agent with a user."""
    from drupe.cli.main import console
    from drupe.identity.user_admin import CLI_ACTOR
    from drupe.identity.user_admin import unshare as unshare_with

    removed = _with_db(
        database_url, data_dir, lambda db: unshare_with(db, CLI_ACTOR, kind, resource_id, name)
    )
    verb = "unshared" if removed else "was not shared:"
    console.print(f"{verb} {kind} {resource_id} with {name}", markup=False)


def audit_command(
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=500, help="How many events (newest first).")
    ] = 50,
    action: Annotated[
        str | None, typer.Option("--action", help="Only this action, e.g. user.role.")
    ] = None,
    database_url: _DatabaseUrl = None,
    data_dir: _DataDir = None,
) -> None:
    """The audit log, newest first: when, action, actor, target, address, detail."""
    import json

    from drupe.cli.main import console

    events = _with_db(database_url, data_dir, lambda db: db.audit.list(limit=limit, action=action))
    if not events:
        console.print("no audit events" + (f" with action {action}" if action else ""))
        return
    for event in events:
        console.print(
            f"{event.at.isoformat(timespec='seconds')}  {event.action}  "
            f"{event.actor_name or event.actor_id or '-'}  {event.target or '-'}  "
            f"{event.address or '-'}  {json.dumps(dict(event.detail), sort_keys=True)}",
            markup=False,
            soft_wrap=True,
        )
