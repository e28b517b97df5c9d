"""``drupe``: the command-line entry point (Typer + Rich).

Commands: ``serve`` (uvicorn with the app), ``chat`` (terminal client over the HTTP API),
``db upgrade``, ``keys create|list|revoke|usage`` (gateway API keys and their usage;
``drupe.cli.keys_usage``), ``agent ...`` (agents and
sessions, over the HTTP API; ``drupe.cli.agent``), ``channel ...`` (IM channels;
``drupe.cli.channel``), ``task ...`` (scheduled tasks and background runs, over the HTTP API;
``drupe.cli.task``) and ``doctor``. Each command
builds its ``Settings`` from the environment (``DRUPE_*``) overridden by its options, and maps
Drupe's errors to a one-line message and exit code 1 (never a traceback for a user mistake).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.markup import escape

from drupe.cli.agent import agent_app
from drupe.cli.channel import channel_app
from drupe.cli.keys_usage import keys_usage
from drupe.cli.task import task_app
from drupe.cli.users import audit_command, users_app
from drupe.errors import ConfigError, DrupeError
from drupe.settings import Settings

__all__ = ["app", "main", "settings_from_options"]

app = typer.Typer(
    name="drupe",
    help="Drupe: a self-hosted AI conversation runtime.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
keys_app = typer.Typer(help="Gateway API keys (for the /v1 routes).", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(keys_app, name="keys")
keys_app.command("usage")(keys_usage)
app.add_typer(agent_app, name="agent")
app.add_typer(channel_app, name="channel")
app.add_typer(task_app, name="task")
app.add_typer(users_app, name="users")
app.command("audit")(audit_command)

console = Console(highlight=False)
errors = Console(stderr=True, highlight=False)

DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Where the SQLite database lives.")
]
DatabaseUrl = Annotated[
    str | None,
    typer.Option("--database-url", help="SQLAlchemy URL (default: SQLite in the data dir)."),
]
RedisUrl = Annotated[
    str | None,
    typer.Option(
        "--redis-url",
        help="Redis URL: with a PostgreSQL --database-url, runs in cluster mode (docs/deploy.md).",
    ),
]
ConfigPath = Annotated[
    Path | None, typer.Option("--config", help="The model/provider config.toml.")
]


def settings_from_options(
    *,
    host: str | None = None,
    port: int | None = None,
    data_dir: Path | None = None,
    database_url: str | None = None,
    config: Path | None = None,
    redis_url: str | None = None,
    workers: int | None = None,
    no_auth: bool = False,
    server: str | None = None,
) -> Settings:
    """``Settings.from_env()`` with the command-line options laid over it."""
    from dataclasses import replace

    settings = Settings.from_env()
    changes: dict[str, Any] = {}
    if host is not None:
        changes["host"] = host
    if port is not None:
        changes["port"] = port
    if data_dir is not None:
        changes["data_dir"] = data_dir
    if database_url is not None:
        changes["database_url"] = database_url
    if config is not None:
        changes["config_path"] = config
    if workers is not None:
        changes["workers"] = workers
    if server is not None:
        changes["server"] = server
    if redis_url is not None:
        changes["cluster"] = replace(settings.cluster, redis_url=redis_url)
    if no_auth:
        changes["auth"] = replace(settings.auth, enabled=False)
    return replace(settings, **changes) if changes else settings


def fail(message: str) -> typer.Exit:
    errors.print(f"[red]error:[/red] {message}")
    return typer.Exit(1)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind (default 127.0.0.1).")] = None,
    port: Annotated[
        int | None, typer.Option(help="Port (default 8787; 0 picks a free one).")
    ] = None,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
    config: ConfigPath = None,
    redis_url: RedisUrl = None,
    workers: Annotated[
        int | None,
        typer.Option(
            help="Server processes on the one socket (default 1, DRUPE_WORKERS); more than 1 "
            "needs cluster mode (--redis-url and a PostgreSQL --database-url)."
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="No sign-in: every request is one local admin (loopback only; DRUPE_AUTH=off).",
        ),
    ] = False,
    server: Annotated[
        str | None,
        typer.Option(help="The ASGI server: uvicorn (default) or granian (DRUPE_SERVER)."),
    ] = None,
) -> None:
    """Run the Drupe server (API, gateway and web UI)."""
    from drupe.cli.server import listen, run_server

    settings = settings_from_options(
        host=host,
        port=port,
        data_dir=data_dir,
        database_url=database_url,
        config=config,
        redis_url=redis_url,
        workers=workers,
        no_auth=no_auth,
        server=server,
    )
    try:
        settings.check()
    except ConfigError as err:
        raise fail(str(err)) from err
    from drupe.identity.first_run import sign_in_link

    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise fail(f"cannot create the data dir {str(settings.data_dir)!r}: {err}") from err
    try:
        link = anyio.run(sign_in_link, settings)
    except DrupeError as err:
        raise fail(str(err)) from err
    try:
        sock, url = listen(settings)
    except OSError as err:
        raise fail(f"cannot listen on {settings.host}:{settings.port}: {err}") from err

    def announce(detail: str = "") -> None:
        shown = f"{url}{link}" if link is not None else url
        console.print(f"Drupe is listening{detail}. Open [bold]{shown}[/bold]", soft_wrap=True)
        if link is not None:
            console.print("(a one-time sign-in link: it signs you in as the local admin)")
        elif not settings.auth.enabled:
            console.print("[yellow]auth is off[/yellow]: every request is the local admin")
        console.file.flush()

    try:
        if settings.workers > 1:
            from drupe.cli.workers import run_workers

            status = run_workers(
                settings,
                sock,
                announce=lambda: announce(f" ({settings.workers} workers)"),
                report=lambda line: errors.print(f"[yellow]drupe:[/yellow] {escape(line)}"),
            )
            if status:
                raise typer.Exit(status)
            return
        started = run_server(settings, sock, announce)
    finally:
        sock.close()
    if not started:
        raise typer.Exit(1)


@app.command()
def chat(
    conversation: Annotated[
        str | None, typer.Argument(help="Conversation id (default: a new one).")
    ] = None,
    url: Annotated[str, typer.Option(help="The Drupe server.")] = "http://127.0.0.1:8787",
    model: Annotated[
        list[str] | None, typer.Option("--model", "-m", help="Model id (repeat for several).")
    ] = None,
) -> None:
    """Chat in the terminal. Typing while an answer streams steers; /stop stops; /quit quits."""
    from drupe.cli.chat_client import ChatClient

    client = ChatClient(url=url.rstrip("/"), conversation_id=conversation, models=model or [])
    try:
        anyio.run(client.run)
    except DrupeError as err:
        raise fail(str(err)) from err
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


@db_app.command("upgrade")
def db_upgrade(database_url: DatabaseUrl = None, data_dir: DataDir = None) -> None:
    """Migrate the database schema to the newest revision."""
    from drupe.persistence.db import upgrade

    settings = settings_from_options(database_url=database_url, data_dir=data_dir)
    try:
        revision = anyio.run(lambda: upgrade(settings.database_url, data_dir=settings.data_dir))
    except DrupeError as err:
        raise fail(str(err)) from err
    console.print(f"database is at revision [bold]{revision}[/bold]")


def _with_keys(settings: Settings, action: Any) -> Any:
    from drupe.persistence.db import open_database

    async def run() -> Any:
        async with open_database(settings.database_url, data_dir=settings.data_dir) as db:
            return await action(db.api_keys)

    try:
        return anyio.run(run)
    except DrupeError as err:
        raise fail(str(err)) from err


def _id_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


def _scope_summary(record: Any) -> str:
    shown = []
    if record.allowed_models is not None:
        shown.append("models " + ",".join(record.allowed_models))
    if record.allowed_agents is not None:
        shown.append("agents " + ",".join(record.allowed_agents))
    if record.requests_per_minute is not None:
        shown.append(f"{record.requests_per_minute} req/min")
    if record.tokens_per_day is not None:
        shown.append(f"{record.tokens_per_day} tokens/day")
    return "; ".join(shown) or "any model or agent, no budget"


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Argument(help="What the key is for.")],
    models: Annotated[
        str | None,
        typer.Option(
            "--models", help="Comma-separated model ids the key may use ('provider:*' allowed)."
        ),
    ] = None,
    agents: Annotated[
        str | None, typer.Option("--agents", help="Comma-separated agent ids the key may drive.")
    ] = None,
    rpm: Annotated[
        int | None, typer.Option("--rpm", min=1, help="Requests per minute (429 above).")
    ] = None,
    tpd: Annotated[
        int | None, typer.Option("--tpd", min=1, help="Tokens per UTC day (429 above).")
    ] = None,
    database_url: DatabaseUrl = None,
    data_dir: DataDir = None,
) -> None:
    """Create a gateway API key and print it (once: only its hash is stored)."""
    from drupe.persistence.records import KeyScopes

    settings = settings_from_options(database_url=database_url, data_dir=data_dir)
    scopes = KeyScopes(
        models=_id_list(models),
        agents=_id_list(agents),
        requests_per_minute=rpm,
        tokens_per_day=tpd,
    )
    plaintext, record = _with_keys(settings, lambda keys: keys.create(name, scopes))
    console.print(f"created key [bold]{record.id}[/bold] ({escape(record.name)})")
    console.print(f"scope: {escape(_scope_summary(record))}")
    console.print("Store it now, it is not shown again:")
    print(plaintext)


@keys_app.command("list")
def keys_list(database_url: DatabaseUrl = None, data_dir: DataDir = None) -> None:
    """List gateway API keys (prefixes only)."""
    settings = settings_from_options(database_url=database_url, data_dir=data_dir)
    records = _with_keys(settings, lambda keys: keys.list())
    if not records:
        console.print("no API keys; create one with: drupe keys create NAME")
        return
    for r in records:
        used = r.last_used_at.isoformat(timespec="seconds") if r.last_used_at else "never used"
        state = (
            f"revoked {r.revoked_at.isoformat(timespec='seconds')}" if r.revoked_at else "active"
        )
        console.print(
            f"{r.id}  {r.prefix}…  {escape(r.name)}  created "
            f"{r.created_at.isoformat(timespec='seconds')}  {used}  {state}  "
            f"scope: {escape(_scope_summary(r))}",
            soft_wrap=True,
        )


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(metavar="ID", help="Key id or listed prefix.")],
    database_url: DatabaseUrl = None,
    data_dir: DataDir = None,
) -> None:
    """Revoke a gateway API key."""
    settings = settings_from_options(database_url=database_url, data_dir=data_dir)
    record = _with_keys(settings, lambda keys: keys.revoke(key_id))
    console.print(f"revoked key [bold]{record.id}[/bold] ({escape(record.name)})")


@app.command()
def doctor(
    data_dir: DataDir = None, database_url: DatabaseUrl = None, config: ConfigPath = None
) -> None:
    """Check the config, providers, database, cluster Redis and MCP servers; say what is wrong
    and how to fix it."""
    from drupe.cli.doctor import run_checks

    settings = settings_from_options(data_dir=data_dir, database_url=database_url, config=config)
    results = anyio.run(lambda: run_checks(settings))
    problems = 0
    marks = {
        "ok": "[green]  ok[/green]",
        "warn": "[yellow]warn[/yellow]",
        "fail": "[red]FAIL[/red]",
    }
    for check in results:
        console.print(
            f"{marks[check.level]}  [bold]{escape(check.name)}[/bold]: {escape(check.message)}",
            soft_wrap=True,
        )
        if check.fix:
            console.print(f"      fix: {escape(check.fix)}", soft_wrap=True)
        problems += check.level == "fail"
    if problems:
        console.print(f"\n{problems} problem(s) found")
        raise typer.Exit(1)
    console.print("\nno problems found")


def main() -> None:
    """Console-script entry point."""
    app()
