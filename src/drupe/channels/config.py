"""Channel configuration: ``[channels.<id>]`` tables of ``config.toml``.

File format::

    [channels.family]
    type = "telegram"                 # telegram | slack | webhook
    token_env = "FAMILY_BOT_TOKEN"    # the env var holding the bot token (never the token)
    secret_env = "FAMILY_SECRET"      # slack: signing secret; webhook: HMAC secret;
                                      # telegram webhook mode: the secret_token header value
    allowed_users = ["123456"]        # deny by default: empty lists admit nobody
    allowed_chats = ["-100200300"]    # a message passes when its user OR its chat is listed
    target = "model:scripted:echo"    # or "agent:<agent id>" (one agent session per chat)
    debounce = 8.0                    # seconds; 0 disables the merge of a burst
    mode = "polling"                  # telegram: polling | webhook
    base_url = "..."                  # the platform API's base URL (self-hosted Bot API, tests)
    url = "https://bridge.example/in" # webhook: where outbound messages are POSTed
    rate_limit = 20                   # messages per chat per minute
    max_attachment_bytes = 10485760
    headless = false                  # true: tool approvals are denied instead of asked

Secrets are read from the environment at start and live only in ``ChannelConfig.secrets``,
which is excluded from ``repr`` and from every API answer.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

from drupe.errors import ConfigError

__all__ = [
    "CHANNEL_TYPES",
    "ChannelConfig",
    "ChannelType",
    "Target",
    "load_channel_configs",
    "parse_channel_configs",
]

ChannelType = Literal["telegram", "slack", "webhook"]
CHANNEL_TYPES: Final = get_args(ChannelType)
DEFAULT_DEBOUNCE: Final = 8.0
_KEYS: Final = frozenset(
    {
        "type",
        "token_env",
        "secret_env",
        "app_token_env",
        "allowed_users",
        "allowed_chats",
        "run_as",
        "users",
        "target",
        "debounce",
        "mode",
        "base_url",
        "url",
        "rate_limit",
        "max_attachment_bytes",
        "headless",
        "slash_command",
        "public_url",
    }
)


@dataclass(frozen=True, slots=True)
class Target:
    kind: Literal["model", "agent"]
    id: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelConfig:
    id: str
    type: ChannelType
    target: Target
    token_env: str | None = None
    secret_env: str | None = None
    app_token_env: str | None = None
    allowed_users: frozenset[str] = frozenset()
    allowed_chats: frozenset[str] = frozenset()
    debounce: float = DEFAULT_DEBOUNCE
    mode: Literal["polling", "webhook", "http", "socket"] = "polling"
    base_url: str | None = None
    url: str | None = None
    public_url: str | None = None
    rate_limit: int = 20
    max_attachment_bytes: int = 10 * 1024 * 1024
    headless: bool = False
    slash_command: str = "/drupe"
    """Slack: the slash command that carries the chat commands (``/drupe stop``)."""
    run_as: str | None = None
    """The Drupe user the chats act as (their conversations are that user's); None: the admin."""
    users: Mapping[str, str] = field(default_factory=dict)
    """Platform user id -> Drupe user name (wins over ``run_as`` for that platform user)."""
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """``token`` / ``secret`` / ``app_token`` values read from the environment."""

    @property
    def single_receiver(self) -> bool:
        """Whether the platform delivers inbound events over ONE connection (Telegram long
        polling, Slack Socket Mode): in cluster mode only one node may receive them."""
        return (self.type == "telegram" and self.mode != "webhook") or (
            self.type == "slack" and self.mode == "socket"
        )

    @property
    def token(self) -> str | None:
        return self.secrets.get("token")

    @property
    def secret(self) -> str | None:
        return self.secrets.get("secret")

    def public(self) -> dict[str, Any]:
        """What the API shows: names of env vars, never their values."""
        return {
            "id": self.id,
            "type": self.type,
            "target": str(self.target),
            "tokenEnv": self.token_env,
            "secretEnv": self.secret_env,
            "allowedUsers": sorted(self.allowed_users),
            "allowedChats": sorted(self.allowed_chats),
            "debounce": self.debounce,
            "mode": self.mode,
            "rateLimit": self.rate_limit,
            "maxAttachmentBytes": self.max_attachment_bytes,
            "headless": self.headless,
        }


def _slash_command(raw: object, prefix: str) -> str:
    if not isinstance(raw, str) or not raw.startswith("/") or len(raw) < 2 or " " in raw:
        raise ConfigError(f"{prefix}.slash_command must look like '/drupe'")
    return raw


def _target(raw: object, prefix: str) -> Target:
    if not isinstance(raw, str) or ":" not in raw:
        raise ConfigError(f"{prefix}.target must be 'model:<model id>' or 'agent:<agent id>'")
    kind, _, ident = raw.partition(":")
    if kind not in ("model", "agent") or not ident:
        raise ConfigError(f"{prefix}.target must be 'model:<model id>' or 'agent:<agent id>'")
    return Target(kind, ident)  # type: ignore[arg-type]


def _ids(raw: object, prefix: str, key: str) -> frozenset[str]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(x, str | int) for x in raw):
        raise ConfigError(f"{prefix}.{key} must be a list of ids")
    return frozenset(str(x) for x in raw)


def _env(table: Mapping[str, Any], key: str, env: Mapping[str, str], prefix: str) -> str | None:
    name = table.get(key)
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{prefix}.{key} must name an environment variable")
    value = env.get(name)
    if not value:
        raise ConfigError(f"{prefix}: the environment variable {name} is not set")
    return value


def _one(channel_id: str, table: Mapping[str, Any], env: Mapping[str, str]) -> ChannelConfig:
    prefix = f"[channels.{channel_id}]"
    if not isinstance(table, Mapping):
        raise ConfigError(f"{prefix} must be a table")
    unknown = set(table) - _KEYS
    if unknown:
        raise ConfigError(f"{prefix} has unknown keys {sorted(unknown)!r}")
    kind: ChannelType = table.get("type")  # type: ignore[assignment]
    if kind not in CHANNEL_TYPES:
        raise ConfigError(f"{prefix}.type must be one of {list(CHANNEL_TYPES)!r}")
    secrets: dict[str, str] = {}
    for key, name in (
        ("token_env", "token"),
        ("secret_env", "secret"),
        ("app_token_env", "app_token"),
    ):
        value = _env(table, key, env, prefix)
        if value is not None:
            secrets[name] = value
    if kind in ("telegram", "slack") and "token" not in secrets:
        raise ConfigError(f"{prefix} needs token_env (the bot token's environment variable)")
    if kind in ("slack", "webhook") and "secret" not in secrets:
        raise ConfigError(f"{prefix} needs secret_env (the signing secret's environment variable)")
    debounce = table.get("debounce", DEFAULT_DEBOUNCE)
    if not isinstance(debounce, int | float) or debounce < 0:
        raise ConfigError(f"{prefix}.debounce must be a number of seconds >= 0")
    rate = table.get("rate_limit", 20)
    if not isinstance(rate, int) or rate < 1:
        raise ConfigError(f"{prefix}.rate_limit must be a positive number of messages per minute")
    cap = table.get("max_attachment_bytes", 10 * 1024 * 1024)
    if not isinstance(cap, int) or cap < 0:
        raise ConfigError(f"{prefix}.max_attachment_bytes must be a byte count >= 0")
    mode = table.get("mode", "polling" if kind == "telegram" else "http")
    allowed_modes: dict[str, tuple[str, ...]] = {
        "telegram": ("polling", "webhook"),
        "slack": ("http", "socket"),
    }
    if mode not in allowed_modes.get(kind, ("http",)):
        raise ConfigError(f"{prefix}.mode {mode!r} is not supported by {kind}")
    if kind == "slack" and mode == "socket" and "app_token" not in secrets:
        raise ConfigError(f"{prefix}: Socket Mode needs app_token_env")
    for key in ("base_url", "url", "public_url"):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"{prefix}.{key} must be a URL string")
    if kind == "webhook" and not table.get("url"):
        raise ConfigError(f"{prefix} needs url (where outbound messages are POSTed)")
    return ChannelConfig(
        id=channel_id,
        type=kind,
        target=_target(table.get("target"), prefix),
        token_env=table.get("token_env"),
        secret_env=table.get("secret_env"),
        app_token_env=table.get("app_token_env"),
        allowed_users=_ids(table.get("allowed_users"), prefix, "allowed_users"),
        allowed_chats=_ids(table.get("allowed_chats"), prefix, "allowed_chats"),
        debounce=float(debounce),
        mode=mode,
        base_url=table.get("base_url"),
        url=table.get("url"),
        public_url=table.get("public_url"),
        rate_limit=rate,
        max_attachment_bytes=cap,
        headless=bool(table.get("headless", kind == "webhook")),
        slash_command=_slash_command(table.get("slash_command", "/drupe"), prefix),
        run_as=_user_name(table.get("run_as"), f"{prefix}.run_as"),
        users=_user_map(table.get("users"), prefix),
        secrets=secrets,
    )


def _user_name(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a Drupe user name")
    return value.strip()


def _user_map(value: object, prefix: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{prefix}.users must be a table: platform user id = Drupe user name")
    mapped: dict[str, str] = {}
    for platform_id, name in value.items():
        user = _user_name(name, f"{prefix}.users.{platform_id}")
        assert user is not None
        mapped[str(platform_id)] = user
    return mapped


def parse_channel_configs(
    document: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> list[ChannelConfig]:
    env = os.environ if env is None else env
    tables = document.get("channels", {})
    if not isinstance(tables, Mapping):
        raise ConfigError("[channels] must be a table of [channels.<id>] tables")
    out: list[ChannelConfig] = []
    for channel_id, table in tables.items():
        if not channel_id.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"channel id {channel_id!r}: use letters, digits, '-' and '_'")
        out.append(_one(channel_id, table, env))
    return out


def check_channel_configs(
    path: Path,
    resolve_model: Callable[[str], object],
    env: Mapping[str, str] | None = None,
) -> tuple[list[ChannelConfig], list[str]]:
    """Every channel of the file that parses, and EVERY problem (not only the first): a table
    that does not parse, a ``model:`` target the registry cannot resolve (``resolve_model``
    raises ``ConfigError``). An ``agent:`` target is checked by the server (agents live in the
    database)."""
    if not path.is_file():
        return [], []
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        return [], [f"cannot read {str(path)!r}: {err}"]
    tables = document.get("channels", {})
    if not isinstance(tables, Mapping):
        return [], ["[channels] must be a table of [channels.<id>] tables"]
    configs: list[ChannelConfig] = []
    problems: list[str] = []
    for channel_id, table in tables.items():
        try:
            [config] = parse_channel_configs({"channels": {channel_id: table}}, env)
        except ConfigError as err:
            problems.append(str(err))
            continue
        if config.target.kind == "model":
            try:
                resolve_model(config.target.id)
            except ConfigError as err:
                model = config.target.id
                problems.append(f"[channels.{channel_id}] target model {model!r}: {err}")
                continue
        configs.append(config)
    return configs, problems


def load_channel_configs(
    path: Path | None, env: Mapping[str, str] | None = None
) -> list[ChannelConfig]:
    """The channels of the config file at ``path`` (none when it is missing)."""
    if path is None or not path.is_file():
        return []
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot read {str(path)!r}: {err}") from err
    return parse_channel_configs(document, env)
