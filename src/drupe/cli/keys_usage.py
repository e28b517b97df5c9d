"""``drupe keys usage``: gateway requests and tokens per API key and per model, from the database.

``--since``/``--until`` (ISO dates, inclusive; ``--until`` defaults to today in UTC) or
``--days`` (default 30) choose the UTC days, as ``GET /api/usage`` does (the same
``usage_window`` rules and messages). Keys are shown by id, listing prefix and name, never their
secret; requests made without a key (keys not required) are one line of their own. Reads what
the server has written: a running server writes each request's usage right after it ends.
A bad window is one line on standard error and exit code 1.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer
from rich.markup import escape

if TYPE_CHECKING:
    from drupe.persistence.db import Database
    from drupe.persistence.gateway_usage import GatewayCount

__all__ = ["keys_usage"]


def _day(value: str | None, option: str) -> date | None:
    from drupe.cli.main import fail

    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise fail(f"{option} must be an ISO date (YYYY-MM-DD), got {value!r}") from None


def _numbers(count: GatewayCount) -> str:
    return (
        f"{count.requests} requests  {count.input_tokens} in  {count.output_tokens} out  "
        f"{count.total_tokens} total"
    )


def keys_usage(
    since: Annotated[
        str | None, typer.Option("--since", help="First UTC day (YYYY-MM-DD; not with --days).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Last UTC day (YYYY-MM-DD; default today).")
    ] = None,
    days: Annotated[
        int | None, typer.Option("--days", min=1, help="UTC days ending with --until (30).")
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option("--database-url", help="SQLAlchemy URL (default: SQLite in the data dir)."),
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where the SQLite database lives.")
    ] = None,
) -> None:
    """Gateway requests and tokens per API key and per model."""
    from drupe.cli.main import console, fail, settings_from_options
    from drupe.errors import DrupeError
    from drupe.persistence.db import open_database
    from drupe.persistence.usage import usage_window

    settings = settings_from_options(database_url=database_url, data_dir=data_dir)
    first_day, until_day = _day(since, "--since"), _day(until, "--until")
    try:
        first, last = usage_window(first_day, until_day, days, datetime.now(UTC).date())
    except DrupeError as err:
        raise fail(str(err)) from err

    async def read(db: Database) -> tuple[Any, dict[str, Any]]:
        summary = await db.gateway_usage.summary(since=first, until=last)
        return summary, {record.id: record for record in await db.api_keys.list()}

    async def run() -> tuple[Any, dict[str, Any]]:
        async with open_database(settings.database_url, data_dir=settings.data_dir) as db:
            return await read(db)

    try:
        summary, keys = anyio.run(run)
    except DrupeError as err:
        raise fail(str(err)) from err
    console.print(f"gateway usage {first.isoformat()} .. {last.isoformat()} (UTC days)")
    if not summary.totals.requests:
        console.print("no gateway requests in this window")
        return
    console.print(f"[bold]total[/bold]  {_numbers(summary.totals)}")
    console.print("[bold]per key[/bold]")
    for count in summary.keys:
        record = keys.get(count.key) if count.key is not None else None
        if count.key is None:
            label = "(no key)"
        elif record is None:
            label = f"{count.key}  (deleted key)"
        else:
            label = f"{record.id}  {record.prefix}…  {escape(record.name)}"
        console.print(f"  {label}  {_numbers(count)}", soft_wrap=True)
    console.print("[bold]per model[/bold]")
    for count in summary.models:
        console.print(f"  {escape(count.key or '')}  {_numbers(count)}", soft_wrap=True)
