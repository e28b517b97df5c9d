"""``DrupeEnvironment``: every ``DRUPE_*`` environment variable, in one place (pydantic-settings).

Contract: each field is one variable (``DRUPE_`` + the field name in capitals), typed, with its
description; ``Settings.from_env`` reads them through this model and nothing else reads the
server's variables. A bad value is a ``ConfigError`` that names the variable, the value and
what is accepted (pydantic's message: the type, or the accepted values of a choice).
``docs/environment.md`` is generated from this model (``python -m drupe.settings_env``); a test
fails when it is out of date. Switches accept ``1/true/yes/on`` and ``0/false/no/off``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from drupe.errors import ConfigError

__all__ = ["PREFIX", "DrupeEnvironment", "read_environment", "render_markdown"]

PREFIX = "DRUPE_"


class DrupeEnvironment(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=PREFIX, case_sensitive=True, extra="ignore", env_ignore_empty=True
    )

    # Server
    HOST: str | None = Field(
        default=None, description="Address `drupe serve` binds to (127.0.0.1)."
    )
    PORT: int | None = Field(default=None, ge=1, le=65535, description="TCP port (8787).")
    DATA_DIR: str | None = Field(
        default=None, description="Where the SQLite database, traces and uploads live."
    )
    DATABASE_URL: str | None = Field(
        default=None,
        description="SQLAlchemy URL (default: SQLite in the data dir; PostgreSQL: a cluster).",
    )
    CONFIG: str | None = Field(
        default=None, description="The config.toml with providers, MCP, channels."
    )
    ALLOWED_ORIGINS: str | None = Field(
        default=None, description="Comma-separated extra browser origins allowed on /api routes."
    )
    AUTH: bool | None = Field(
        default=None,
        description="on (default): every request signs in; off: one local admin, loopback only.",
    )
    SECRET_KEY: str | None = Field(
        default=None,
        repr=False,
        description=(
            "Seals secrets stored in the database (provider API keys); default: the file "
            "secret.key in the data dir. Every cluster node needs the same one."
        ),
    )
    SECRET_KEY_PREVIOUS: str | None = Field(
        default=None,
        repr=False,
        description=(
            "Comma-separated earlier secret keys, to open secrets sealed before a rotation; "
            "the server re-seals them under DRUPE_SECRET_KEY when it starts."
        ),
    )
    WORKERS: int | None = Field(
        default=None,
        ge=1,
        description="Server processes on one socket (more than 1 needs cluster mode).",
    )
    SERVER: Literal["uvicorn", "granian"] | None = Field(
        default=None,
        description="The ASGI server under the app: uvicorn (default) or granian (one process).",
    )
    MAX_BODY_BYTES: int | None = Field(
        default=None, ge=1024, description="Largest request body on /api and the protocols (2 MiB)."
    )
    MAX_GATEWAY_BODY_BYTES: int | None = Field(
        default=None, ge=1024, description="Largest request body on the /v1 gateway (20 MiB)."
    )
    # Features
    CODE_EXECUTION: bool | None = Field(
        default=None, description="Offer the python_exec tool (off; it is not a sandbox)."
    )
    SCHEDULER: bool | None = Field(
        default=None, description="Fire scheduled tasks in this process (on)."
    )
    SCHEDULE_POLL: float | None = Field(
        default=None,
        gt=0,
        description="Seconds at most between two reads of the due schedules (30).",
    )
    TRACE_STORE: bool | None = Field(
        default=None, description="Keep each conversation's spans under <data dir>/traces (on)."
    )
    GATEWAY_PASSTHROUGH: bool | None = Field(
        default=None,
        description="Forward /v1/chat/completions to OpenAI-wire providers as-is (on).",
    )
    GATEWAY_IDLE_TIMEOUT: float | None = Field(
        default=None, gt=0, description="Seconds a gateway stream may go without a chunk (1200)."
    )
    # Streams
    IDLE_TIMEOUT: float | None = Field(
        default=None, gt=0, description="Seconds a model may go silent before its answer fails."
    )
    GRACE_PERIOD: float | None = Field(
        default=None, ge=0, description="Seconds an ended answer stays resumable."
    )
    MAX_STATUS_RECORDS: int | None = Field(
        default=None, ge=1, description="Conversation statuses kept in memory."
    )
    BACKGROUND_MODE: Literal["continue", "abort"] | None = Field(
        default=None, description="What a turn does when its last subscriber leaves."
    )
    CHECKPOINT_INTERVAL: float | None = Field(
        default=None, ge=0, description="Seconds between saves of a live answer (0: off)."
    )
    CHECKPOINT_BYTES: int | None = Field(
        default=None, ge=1, description="Bytes of new text that force a save of a live answer."
    )
    CHECKPOINT_MAX_LOSS: float | None = Field(
        default=None, ge=0, description="Seconds of seen text a crash may lose at most."
    )
    # Cluster
    REDIS_URL: str | None = Field(
        default=None, description="Redis for cluster mode (with a PostgreSQL DATABASE_URL)."
    )
    NODE_ID: str | None = Field(default=None, description="This process's name in the cluster.")
    LEASE_TTL: float | None = Field(
        default=None, gt=0, description="Seconds an owner's lease lives without renewal (10)."
    )
    COALESCE_MS: float | None = Field(
        default=None,
        ge=0,
        description="Milliseconds a text delta may wait before the chunk log (25).",
    )
    REDIS_PREFIX: str | None = Field(default=None, description="Prefix of every Redis key (drupe).")
    ON_OWNER_LOSS: Literal["error", "retry"] | None = Field(
        default=None,
        description="A takeover ends a lost answer (error) or answers it again (retry).",
    )
    # Models
    DEFAULT_MODEL: str | None = Field(
        default=None, description="The model of a turn that names none (overrides config.toml)."
    )

    @field_validator("BACKGROUND_MODE", "ON_OWNER_LOSS", mode="before")
    @classmethod
    def _choice(cls, value: object) -> object:
        """A choice is read as its trimmed lower-case word (``" Retry"`` is ``retry``)."""
        return value.strip().lower() if isinstance(value, str) else value


def read_environment(env: Mapping[str, str] | None = None) -> DrupeEnvironment:
    """The ``DRUPE_*`` variables of ``env`` (default: the process environment); an empty value
    counts as unset."""
    try:
        if env is None:
            return DrupeEnvironment()
        values = {
            key.removeprefix(PREFIX): value
            for key, value in env.items()
            if key.startswith(PREFIX) and value != ""
        }
        return DrupeEnvironment.model_validate(values)
    except ValidationError as err:
        problems = "; ".join(
            f"{PREFIX}{'.'.join(str(p) for p in e['loc'])}={e.get('input')!r}: {e['msg']}"
            for e in err.errors()
        )
        raise ConfigError(f"bad environment: {problems}") from None


def render_markdown() -> str:
    lines = [
        "# Environment variables",
        "",
        "Generated from `drupe.settings_env.DrupeEnvironment` (`python -m drupe.settings_env`);",
        "`config.toml` and the CLI's options set the same knobs. A bad value stops the server",
        "with the variable, the value and what is accepted.",
        "",
        "| variable | type | meaning |",
        "|---|---|---|",
    ]
    for name, info in DrupeEnvironment.model_fields.items():
        kind = str(info.annotation).replace("typing.", "").replace(" | None", "")
        kind = kind.replace("Literal[", "one of [").replace("<class '", "").replace("'>", "")
        lines.append(f"| `{PREFIX}{name}` | {kind} | {info.description} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
