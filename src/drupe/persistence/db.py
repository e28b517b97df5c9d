"""Open Drupe's database: engine, connection settings, migrations, and the stores.

``open_database`` is the only way in. It normalises the URL (SQLite file in the user data dir by
default; ``postgresql://`` and ``postgres://`` become ``postgresql+asyncpg://``), sets the SQLite
pragmas on every new connection (WAL, ``foreign_keys=ON``, ``busy_timeout``,
``synchronous=NORMAL``), migrates the schema to head, and yields a ``Database`` whose stores are
the only code that issues SQL. The engine is disposed when the block exits, even on error or
cancellation. ``upgrade`` is the same migration step without the rest (``drupe db upgrade``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import orjson
import platformdirs
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

from drupe.errors import ConfigError, PersistenceError
from drupe.persistence import migrate
from drupe.persistence.agents import AgentStore
from drupe.persistence.api_keys import ApiKeyStore
from drupe.persistence.audit import AuditLog
from drupe.persistence.auth_sessions import AuthSessionStore
from drupe.persistence.channels import ChannelStore
from drupe.persistence.chat_links import ChatLinkStore
from drupe.persistence.conversations import ConversationStore
from drupe.persistence.gateway_usage import GatewayUsageStore
from drupe.persistence.identities import IdentityStore
from drupe.persistence.json_text import jsonb_safe
from drupe.persistence.messages import MessageStore
from drupe.persistence.provider_settings import ProviderSettingStore
from drupe.persistence.responses import ResponseStore
from drupe.persistence.schedules import ScheduleStore
from drupe.persistence.search import SearchStore
from drupe.persistence.secret_box import SecretBox
from drupe.persistence.shares import ShareStore
from drupe.persistence.transaction import Sessions, Transactions
from drupe.persistence.usage import UsageStore
from drupe.persistence.users import UserStore

__all__ = ["DEFAULT_FILENAME", "Database", "database_url", "open_database", "upgrade"]

DEFAULT_FILENAME: Final = "drupe.db"
SQLITE_BUSY_TIMEOUT_MS: Final = 5_000
_DISPOSE_TIMEOUT_S: Final = 5.0
_SQLITE_PRAGMAS: Final = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
    "PRAGMA synchronous=NORMAL",
)
_POSTGRES_ALIASES: Final = ("postgresql", "postgres", "postgresql+psycopg2", "postgresql+psycopg")


@dataclass(frozen=True, slots=True, kw_only=True)
class Database:
    """An open database: its engine, a DB-session factory, and the stores over them."""

    engine: AsyncEngine
    sessions: Sessions
    conversations: ConversationStore
    messages: MessageStore
    api_keys: ApiKeyStore
    responses: ResponseStore
    agents: AgentStore
    channels: ChannelStore
    schedules: ScheduleStore
    usage: UsageStore
    gateway_usage: GatewayUsageStore
    search: SearchStore
    users: UserStore
    auth_sessions: AuthSessionStore
    chat_links: ChatLinkStore
    shares: ShareStore
    audit: AuditLog
    identities: IdentityStore
    provider_settings: ProviderSettingStore
    transactions: Transactions
    secrets: SecretBox
    """The box that seals the secrets the stores keep (the provider keys, the ID tokens)."""

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.engine.dialect.name


def database_url(url: str | None = None, *, data_dir: Path | None = None) -> str:
    """Return the async SQLAlchemy URL Drupe connects to.

    ``None`` means the SQLite file ``drupe.db`` in ``data_dir`` (default: the per-user data
    directory, created if missing). Raises ``ConfigError`` for an unsupported URL.
    """
    if url is None:
        directory = data_dir if data_dir is not None else default_data_dir()
        directory.mkdir(parents=True, exist_ok=True)
        return f"sqlite+aiosqlite:///{directory / DEFAULT_FILENAME}"
    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise ConfigError(f"malformed database URL: {err}") from None
    if parsed.drivername in _POSTGRES_ALIASES:
        parsed = parsed.set(drivername="postgresql+asyncpg")
    elif parsed.drivername == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    if parsed.drivername not in ("postgresql+asyncpg", "sqlite+aiosqlite"):
        raise ConfigError(
            f"unsupported database driver {parsed.drivername!r}: use a sqlite:// or "
            "postgresql:// URL"
        )
    return parsed.render_as_string(hide_password=False)


def default_data_dir() -> Path:
    """The data dir when none is given: the user's platform data dir for ``drupe``."""
    return Path(platformdirs.user_data_dir("drupe"))


def _check_sqlite_directory(url: str) -> None:
    # A missing directory is the common way a SQLite open fails; refuse it before aiosqlite
    # starts a worker thread for a connection that cannot succeed.
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    directory = Path(parsed.database).expanduser().parent
    if not directory.is_dir():
        raise PersistenceError(f"could not open database {url}: no directory {str(directory)!r}")


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _dumps_jsonb(value: Any) -> str:
    return jsonb_safe(_dumps(value))


def _create_engine(url: str, connect_args: Mapping[str, Any] | None) -> AsyncEngine:
    engine = create_async_engine(
        url,
        json_serializer=_dumps if url.startswith("sqlite") else _dumps_jsonb,
        json_deserializer=orjson.loads,
        connect_args=dict(connect_args or {}),
        pool_pre_ping=not url.startswith("sqlite"),
    )
    if engine.dialect.name == "sqlite":
        event.listen(engine.sync_engine, "connect", _set_sqlite_pragmas)
    return engine


def _set_sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    try:
        for pragma in _SQLITE_PRAGMAS:
            cursor.execute(pragma)
    finally:
        cursor.close()


@asynccontextmanager
async def open_database(
    url: str | None = None,
    *,
    data_dir: Path | None = None,
    connect_args: Mapping[str, Any] | None = None,
    migrate_schema: bool = True,
) -> AsyncIterator[Database]:
    """Open the database, migrate it to head, and yield the ``Database``.

    Raises ``ConfigError`` for an unsupported URL and ``PersistenceError`` when the database
    cannot be reached or migrated (the message shows the URL without its password).

    ``connect_args`` go to the driver (for example asyncpg's ``server_settings`` to pick a
    schema through ``search_path``). ``migrate_schema=False`` skips the migration step, for
    tools that inspect a database without changing it.
    """
    resolved = database_url(url, data_dir=data_dir)
    secrets = SecretBox(data_dir or default_data_dir())
    _check_sqlite_directory(resolved)
    engine = _create_engine(resolved, connect_args)
    try:
        if migrate_schema:
            try:
                async with engine.begin() as conn:
                    await conn.run_sync(migrate.upgrade)
            except (SQLAlchemyError, OSError) as err:
                shown = make_url(resolved).render_as_string(hide_password=True)
                raise PersistenceError(f"could not open database {shown}: {err}") from err
        sessions = async_sessionmaker(engine, expire_on_commit=False)
        dialect = engine.dialect.name
        transactions = Transactions(sessions, serialize_writes=dialect == "sqlite", engine=engine)
        yield Database(
            engine=engine,
            sessions=sessions,
            conversations=ConversationStore(transactions),
            messages=MessageStore(transactions, dialect=dialect),
            api_keys=ApiKeyStore(transactions),
            responses=ResponseStore(transactions),
            agents=AgentStore(transactions),
            channels=ChannelStore(transactions),
            schedules=ScheduleStore(transactions),
            usage=UsageStore(transactions),
            gateway_usage=GatewayUsageStore(transactions, dialect=dialect),
            search=SearchStore(transactions, dialect=dialect),
            users=UserStore(transactions),
            auth_sessions=AuthSessionStore(transactions, secrets),
            chat_links=ChatLinkStore(transactions),
            shares=ShareStore(transactions),
            audit=AuditLog(transactions),
            identities=IdentityStore(transactions),
            provider_settings=ProviderSettingStore(transactions, secrets),
            transactions=transactions,
            secrets=secrets,
        )
    finally:
        # Shielded and bounded: a cancelled caller must still give its connections back.
        with anyio.move_on_after(_DISPOSE_TIMEOUT_S, shield=True):
            await engine.dispose()


async def upgrade(
    url: str | None = None,
    *,
    data_dir: Path | None = None,
    connect_args: Mapping[str, Any] | None = None,
) -> str:
    """Migrate the database to head and return the revision it is now at."""
    async with (
        open_database(url, data_dir=data_dir, connect_args=connect_args) as database,
        database.engine.connect() as conn,
    ):
        revision = await conn.run_sync(migrate.current_revision)
    assert revision is not None, "a migrated database has a revision"
    return revision
