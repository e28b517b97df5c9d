"""``Settings``: every runtime knob in one value, passed explicitly; nothing is read at import.

``Settings.from_env()`` reads the ``DRUPE_*`` environment variables through one
pydantic-settings model (``drupe.settings_env``; the list is generated into
``docs/environment.md``); the CLI overrides fields from its options. ``redis_url`` together
with a PostgreSQL ``database_url`` turns cluster mode on (``docs/deploy.md``); SQLite without
Redis is the embedded default.
Defaults are the secure, embedded ones: bind to 127.0.0.1, SQLite in the user data dir, the
gateway requires API keys, no code-execution tool.
"""

from __future__ import annotations

import ipaddress
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final, Literal

import platformdirs

from drupe.agent.models.config import config_path as default_config_path
from drupe.errors import ConfigError
from drupe.settings_auth import OidcSettings, read_auth_table
from drupe.settings_env import read_environment
from drupe.streaming.checkpoints import CheckpointPolicy
from drupe.streaming.config import StreamConfig

OwnerLoss = Literal["error", "retry"]
OWNER_LOSS: Final[tuple[OwnerLoss, ...]] = ("error", "retry")

__all__ = [
    "OWNER_LOSS",
    "AuthSettings",
    "ClusterSettings",
    "Limits",
    "OidcSettings",
    "OwnerLoss",
    "Settings",
    "is_loopback",
]


SERVERS = ("uvicorn", "granian")
"""The ASGI servers ``drupe serve`` can run the app on (the first is the default)."""


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` reaches only this machine (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthSettings:
    """Who may call (``docs/security.md``). On by default; off only on a loopback bind."""

    enabled: bool = True
    """Every request is made by a signed-in user (``--no-auth`` / ``DRUPE_AUTH=off``: one
    local admin, on loopback only)."""
    session_days: float = 14.0
    """How long a sign-in lasts."""
    cache_seconds: float = 2.0
    """How long a node trusts a session or token it looked up (a revocation made on another
    node is seen within it; on the node that made it, at once)."""
    sweep_seconds: float = 2.0
    """How often open streams are checked against revoked sessions and disabled users."""
    link_minutes: float = 60.0
    """How long the first run's one-time sign-in link works."""
    max_failures_per_user: int = 5
    max_failures_per_address: int = 20
    """Failed sign-ins allowed per minute, per user name and per client address."""
    oidc: OidcSettings | None = None
    """Single sign-on through one OpenID Connect provider (``[auth.oidc]`` in config.toml)."""
    trusted_header: str | None = None
    """A header a reverse proxy sets to the signed-in user's name (``[auth] trusted_header``),
    believed only from ``trusted_proxies``."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or networks (``127.0.0.1/32``) whose ``trusted_header`` is believed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Explicit caps of the HTTP edge."""

    max_body_bytes: int = 2 * 1024 * 1024
    """Largest accepted request body on the browser API and the protocol routes."""
    max_gateway_body_bytes: int = 20 * 1024 * 1024
    """Largest accepted request body on the LLM gateway's dialects (``/v1``: images as base64)."""
    max_message_chars: int = 200_000
    """Largest user message text."""
    max_page_size: int = 200
    """Most conversations one listing page returns."""
    max_models_per_turn: int = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSettings:
    """Cluster mode (``docs/deploy.md``): on when ``redis_url`` is set."""

    redis_url: str | None = None
    node_id: str | None = None
    """This process's name in leases and routing; None: ``<host>-<pid>-<random>``."""
    lease_ttl: float = 10.0
    """Seconds an owner's lease lives without renewal (renewed every third of it)."""
    coalesce_window: float = 0.025
    """Seconds a text delta may wait before the owner writes it to the chunk log."""
    key_prefix: str = "drupe"
    """Prefix of every Redis key (several clusters may share one Redis)."""
    on_owner_loss: OwnerLoss = "error"
    """What a node that takes over a lost owner's turn does with its unfinished answers:
    ``"error"`` ends them (the partial text kept, one ``data-error`` part); ``"retry"`` also
    answers the same user message again as a new attempt, which every subscriber follows."""

    @property
    def enabled(self) -> bool:
        return self.redis_url is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8787
    data_dir: Path = field(default_factory=lambda: Path(platformdirs.user_data_dir("drupe")))
    database_url: str | None = None
    """None: SQLite ``drupe.db`` in ``data_dir``."""
    config_path: Path | None = None
    """The model/provider TOML; None: ``config.toml`` in the user config dir."""
    stream: StreamConfig = field(default_factory=StreamConfig)
    checkpoints: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    """When live answers are saved into their rows (``interval`` 0 turns checkpoints off)."""
    limits: Limits = field(default_factory=Limits)
    allowed_origins: tuple[str, ...] = ()
    """Extra browser origins allowed on /api routes (same-origin is always allowed)."""
    gateway_idle_timeout: float = 1200.0
    """Seconds a gateway stream may go without a chunk before it ends in an error."""
    require_gateway_keys: bool = True
    gateway_passthrough: bool = True
    """Forward ``/v1/chat/completions`` for OpenAI-wire providers as-is (``drupe.gateway.
    passthrough``) instead of through the agent loop (``DRUPE_GATEWAY_PASSTHROUGH=off``)."""
    code_execution: bool = False
    """Offer the ``python_exec`` tool (off unless explicitly enabled: it is not a sandbox)."""
    trace_store: bool = True
    """Keep each conversation's spans under ``<data_dir>/traces`` (``DRUPE_TRACE_STORE=off``)."""
    run_scheduler: bool = True
    """Fire scheduled tasks in this process (several processes may share one database)."""
    schedule_poll: float = 30.0
    """Seconds at most between two reads of the due schedules (``DRUPE_SCHEDULE_POLL``): how
    soon a schedule written by another process is seen."""
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    workers: int = 1
    """Server processes ``drupe serve`` starts on one listening socket (more than 1 needs cluster
    mode: the processes share rows through PostgreSQL and live streams through Redis)."""
    server: str = "uvicorn"
    """The ASGI server ``drupe serve`` runs the app on: ``uvicorn`` or ``granian``
    (``--server``, ``DRUPE_SERVER``; docs/deploy.md says what differs)."""

    def with_file_limits(self) -> Settings:
        """These settings with the ``[limits]`` table of the config file under them: a key of
        the file replaces the default, a ``DRUPE_MAX_*`` variable wins over the file."""
        path = self.config_path or default_config_path()
        if not path.is_file():
            return self
        try:
            table = tomllib.loads(path.read_text()).get("limits", {})
        except (OSError, tomllib.TOMLDecodeError) as err:
            raise ConfigError(f"{path}: cannot read [limits]: {err}") from err
        if not isinstance(table, dict) or not table:
            return self
        known = {f.name for f in fields(Limits)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(
                f"{path}: [limits] has no key {unknown[0]!r} (known: {sorted(known)})"
            )
        bad = [
            k for k, v in table.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1
        ]
        if bad:
            raise ConfigError(f"{path}: [limits] {bad[0]} must be a positive whole number")
        env = read_environment()
        given_by_env = _given(
            max_body_bytes=env.MAX_BODY_BYTES, max_gateway_body_bytes=env.MAX_GATEWAY_BODY_BYTES
        )
        return replace(self, limits=replace(self.limits, **{**table, **given_by_env}))

    def with_file_tables(self) -> Settings:
        """These settings with the config file's ``[limits]`` and ``[auth]`` tables."""
        return self.with_file_limits().with_file_auth()

    def with_file_auth(self) -> Settings:
        """These settings with the ``[auth]`` table of the config file (``drupe.settings_auth``:
        ``[auth.oidc]``, ``trusted_header``, ``trusted_proxies``)."""
        path = self.config_path or default_config_path()
        if not path.is_file():
            return self
        try:
            table = tomllib.loads(path.read_text()).get("auth")
        except (OSError, tomllib.TOMLDecodeError) as err:
            raise ConfigError(f"{path}: cannot read [auth]: {err}") from err
        if table is None:
            return self
        return replace(self, auth=replace(self.auth, **read_auth_table(path, table)))

    def check(self) -> None:
        """Refuse settings that cannot work together (``ConfigError`` says what to change).

        Cluster mode shares rows through PostgreSQL: Redis with SQLite is refused. Several
        workers are several processes, so they need cluster mode."""
        url = self.database_url or ""
        postgres = url.startswith(("postgresql", "postgres"))
        if self.schedule_poll <= 0:
            raise ConfigError("DRUPE_SCHEDULE_POLL must be a positive number of seconds")
        if self.workers < 1:
            raise ConfigError("--workers (DRUPE_WORKERS) must be at least 1")
        if self.server not in SERVERS:
            raise ConfigError(f"--server (DRUPE_SERVER) must be one of {', '.join(SERVERS)}")
        if self.server == "granian" and self.workers > 1:
            raise ConfigError("--server granian runs one process: --workers needs uvicorn")
        if self.workers > 1 and not (self.cluster.enabled and postgres):
            missing = [
                *([] if postgres else ["--database-url postgresql+asyncpg://user@host/db"]),
                *([] if self.cluster.enabled else ["--redis-url redis://host:6379/0"]),
            ]
            raise ConfigError(
                f"--workers {self.workers} runs {self.workers} processes that share their state "
                f"through PostgreSQL and Redis (cluster mode): add {' and '.join(missing)} "
                "(or DRUPE_DATABASE_URL / DRUPE_REDIS_URL); see docs/deploy.md"
            )
        if not self.auth.enabled and not is_loopback(self.host):
            raise ConfigError(
                f"auth is off (--no-auth / DRUPE_AUTH=off), so --host {self.host} would let "
                "anyone who reaches the port read and drive everything: bind to 127.0.0.1, or "
                "turn auth on (drop --no-auth) and create users with `drupe users create`"
            )
        if self.cluster.on_owner_loss not in OWNER_LOSS:
            raise ConfigError(
                f"DRUPE_ON_OWNER_LOSS must be one of {', '.join(OWNER_LOSS)}, "
                f"not {self.cluster.on_owner_loss!r}"
            )
        if not self.cluster.enabled:
            return
        if not postgres:
            raise ConfigError(
                "cluster mode (--redis-url / DRUPE_REDIS_URL) needs a PostgreSQL --database-url "
                "(DRUPE_DATABASE_URL), e.g. postgresql+asyncpg://user@host/db; "
                "SQLite is for one process"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings the ``DRUPE_*`` variables give (``drupe.settings_env``: every variable,
        its type and meaning; a bad value is a ``ConfigError`` naming it)."""
        e = read_environment(env)
        kwargs: dict[str, Any] = _given(
            host=e.HOST,
            port=e.PORT,
            data_dir=Path(e.DATA_DIR) if e.DATA_DIR else None,
            database_url=e.DATABASE_URL,
            config_path=Path(e.CONFIG) if e.CONFIG else None,
            code_execution=e.CODE_EXECUTION,
            run_scheduler=e.SCHEDULER,
            trace_store=e.TRACE_STORE,
            gateway_passthrough=e.GATEWAY_PASSTHROUGH,
            gateway_idle_timeout=e.GATEWAY_IDLE_TIMEOUT,
            schedule_poll=e.SCHEDULE_POLL,
            workers=e.WORKERS,
            server=e.SERVER,
        )
        limits = _given(
            max_body_bytes=e.MAX_BODY_BYTES, max_gateway_body_bytes=e.MAX_GATEWAY_BODY_BYTES
        )
        if limits:
            kwargs["limits"] = Limits(**limits)
        if e.ALLOWED_ORIGINS:
            origins = (o.strip() for o in e.ALLOWED_ORIGINS.split(","))
            kwargs["allowed_origins"] = tuple(o for o in origins if o)
        stream = _given(
            idle_timeout=e.IDLE_TIMEOUT,
            grace_period=e.GRACE_PERIOD,
            max_status_records=e.MAX_STATUS_RECORDS,
            background_mode=e.BACKGROUND_MODE,
        )
        if stream:
            kwargs["stream"] = StreamConfig(**stream)
        checkpoints = _given(
            interval=e.CHECKPOINT_INTERVAL,
            max_bytes=e.CHECKPOINT_BYTES,
            max_loss=e.CHECKPOINT_MAX_LOSS,
        )
        if checkpoints:
            kwargs["checkpoints"] = CheckpointPolicy(**checkpoints)
        cluster = _given(
            redis_url=e.REDIS_URL,
            node_id=e.NODE_ID,
            lease_ttl=e.LEASE_TTL,
            coalesce_window=e.COALESCE_MS / 1000 if e.COALESCE_MS is not None else None,
            key_prefix=e.REDIS_PREFIX,
            on_owner_loss=e.ON_OWNER_LOSS,
        )
        if cluster:
            kwargs["cluster"] = ClusterSettings(**cluster)
        if e.AUTH is not None:
            kwargs["auth"] = AuthSettings(enabled=e.AUTH)
        return cls(**kwargs)


def _given(**values: Any) -> dict[str, Any]:
    """The values that are set (a variable left unset keeps the field's default)."""
    return {key: value for key, value in values.items() if value is not None}
