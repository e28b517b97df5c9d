"""``drupe users``: the people who sign in (issue 20), scripted by other tools, so exactly:

* ``drupe users create NAME [--admin] [--email E] --password-stdin``: the password is read from
  standard input (one line; never an argument, never echoed);
* ``drupe users list``, ``drupe users disable NAME``, ``drupe users role NAME admin|member``;
* ``drupe users token NAME [--name LABEL]``: a personal API token, printed once on the last
  line of standard output (only its hash is stored).

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
    from drupe.persistence.users import UserStore

__all__ = ["users_app"]

users_app = typer.Typer(help="Users who sign in, their roles and tokens.", no_args_is_help=True)

_DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Where the SQLite database lives.")
]
_DatabaseUrl = Annotated[
    str | None,
    typer.Option("--database-url", help="SQLAlchemy URL (default: SQLite in the data dir)."),
]


def _with_users(database_url: str | None, data_dir: Path | None, action: Any) -> Any:
    from drupe.cli.main import fail, settings_from_options
    from drupe.errors import DrupeError
    from drupe.persistence.db import open_database

    settings = settings_from_options(database_url=database_url, data_dir=data_dir)

    async def run() -> Any:
        async with open_database(settings.database_url, data_dir=settings.data_dir) as db:
            users: UserStore = db.users
            return await action(users)

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
    password = sys.stdin.readline().rstrip("\r\n")
    user = _with_users(
        database_url,
        data_dir,
        lambda users: users.create(
            name, password=password, role="admin" if admin else "member", email=email
        ),
    )
    console.print(f"created {user.role} {user.name} ({user.id})", markup=False)


@users_app.command("list")
def list_users(database_url: _DatabaseUrl = None, data_dir: _DataDir = None) -> None:
    """List the users: name, role, state, e-mail, created."""
    from drupe.cli.main import console

    records = _with_users(database_url, data_dir, lambda users: users.list_users())
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
    """Disable a user (it can no longer sign in; its tokens stop working)."""
    from drupe.cli.main import console

    user = _with_users(database_url, data_dir, lambda users: users.set_disabled(name))
    console.print(f"disabled {user.name}", markup=False)


@users_app.command("role")
def role(
    name: Annotated[str, typer.Argument(help="The user.")],
    new_role: Annotated[str, typer.Argument(metavar="admin|member", help="The new role.")],
    database_url: _DatabaseUrl = None,
    data_dir: _DataDir = None,
) -> None:
    """Make a user an admin or a member."""
    from drupe.cli.main import console

    user = _with_users(database_url, data_dir, lambda users: users.set_role(name, new_role))
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

    plaintext, record = _with_users(
        database_url, data_dir, lambda users: users.create_token(name, label)
    )
    console.print(f"created token {record.id} ({record.name}) for {name}", markup=False)
    console.print("Store it now, it is not shown again:")
    print(plaintext)
