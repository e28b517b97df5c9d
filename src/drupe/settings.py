"""``Settings``: every runtime knob in one value, passed explicitly; nothing is read at import.

``Settings.from_env()`` reads ``DRUPE_*`` environment variables (``DRUPE_HOST``, ``DRUPE_PORT``,
``DRUPE_DATA_DIR``, ``DRUPE_DATABASE_URL``, ``DRUPE_CONFIG``, ``DRUPE_ALLOWED_ORIGINS``,
``DRUPE_CODE_EXECUTION``, ``DRUPE_GATEWAY_IDLE_TIMEOUT``, ``DRUPE_IDLE_TIMEOUT``,
``DRUPE_GRACE_PERIOD``, ``DRUPE_BACKGROUND_MODE``, ``DRUPE_MAX_STATUS_RECORDS``,
``DRUPE_CHECKPOINT_INTERVAL``, ``DRUPE_CHECKPOINT_BYTES``, ``DRUPE_CHECKPOINT_MAX_LOSS``,
``DRUPE_SCHEDULER=off``, ``DRUPE_TRACE_STORE=off``); the CLI overrides fields from its options.
Defaults are the secure, embedded ones: bind to 127.0.0.1, SQLite in the user data dir, the
gateway requires API keys, no code-execution tool.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from drupe.streaming.checkpoints import CheckpointPolicy
from drupe.streaming.config import StreamConfig

__all__ = ["Limits", "Settings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Explicit caps of the HTTP edge."""

    max_body_bytes: int = 2 * 1024 * 1024
    """Largest accepted request body."""
    max_message_chars: int = 200_000
    """Largest user message text."""
    max_page_size: int = 200
    """Most conversations one listing page returns."""
    max_models_per_turn: int = 8


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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        kwargs: dict[str, object] = {}
        if env.get("DRUPE_HOST"):
            kwargs["host"] = env["DRUPE_HOST"]
        if env.get("DRUPE_PORT"):
            kwargs["port"] = int(env["DRUPE_PORT"])
        if env.get("DRUPE_DATA_DIR"):
            kwargs["data_dir"] = Path(env["DRUPE_DATA_DIR"])
        if env.get("DRUPE_DATABASE_URL"):
            kwargs["database_url"] = env["DRUPE_DATABASE_URL"]
        if env.get("DRUPE_CONFIG"):
            kwargs["config_path"] = Path(env["DRUPE_CONFIG"])
        if env.get("DRUPE_ALLOWED_ORIGINS"):
            kwargs["allowed_origins"] = tuple(
                o.strip() for o in env["DRUPE_ALLOWED_ORIGINS"].split(",") if o.strip()
            )
        if env.get("DRUPE_CODE_EXECUTION", "").lower() in ("1", "true", "yes"):
            kwargs["code_execution"] = True
        if env.get("DRUPE_SCHEDULER", "").lower() in ("0", "false", "no", "off"):
            kwargs["run_scheduler"] = False
        if env.get("DRUPE_TRACE_STORE", "").lower() in ("0", "false", "no", "off"):
            kwargs["trace_store"] = False
        if env.get("DRUPE_GATEWAY_PASSTHROUGH", "").lower() in ("0", "false", "no", "off"):
            kwargs["gateway_passthrough"] = False
        if env.get("DRUPE_GATEWAY_IDLE_TIMEOUT"):
            kwargs["gateway_idle_timeout"] = float(env["DRUPE_GATEWAY_IDLE_TIMEOUT"])
        stream: dict[str, object] = {}
        if env.get("DRUPE_IDLE_TIMEOUT"):
            stream["idle_timeout"] = float(env["DRUPE_IDLE_TIMEOUT"])
        if env.get("DRUPE_GRACE_PERIOD"):
            stream["grace_period"] = float(env["DRUPE_GRACE_PERIOD"])
        if env.get("DRUPE_MAX_STATUS_RECORDS"):
            stream["max_status_records"] = int(env["DRUPE_MAX_STATUS_RECORDS"])
        if env.get("DRUPE_BACKGROUND_MODE"):
            mode = env["DRUPE_BACKGROUND_MODE"]
            if mode not in ("continue", "abort"):
                raise ValueError("DRUPE_BACKGROUND_MODE must be 'continue' or 'abort'")
            stream["background_mode"] = mode
        if stream:
            kwargs["stream"] = StreamConfig(**stream)  # type: ignore[arg-type]
        checkpoints: dict[str, float] = {}
        if env.get("DRUPE_CHECKPOINT_INTERVAL"):
            checkpoints["interval"] = float(env["DRUPE_CHECKPOINT_INTERVAL"])
        if env.get("DRUPE_CHECKPOINT_BYTES"):
            checkpoints["max_bytes"] = int(env["DRUPE_CHECKPOINT_BYTES"])
        if env.get("DRUPE_CHECKPOINT_MAX_LOSS"):
            checkpoints["max_loss"] = float(env["DRUPE_CHECKPOINT_MAX_LOSS"])
        if checkpoints:
            kwargs["checkpoints"] = CheckpointPolicy(**checkpoints)  # type: ignore[arg-type]
        return cls(**kwargs)  # type: ignore[arg-type]
