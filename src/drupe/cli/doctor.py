"""``drupe doctor``: checks that say what is wrong and how to fix it.

Each check returns a ``Check(name, level, message, fix)``: ``ok``, ``warn`` (works, but worth
knowing) or ``fail`` (Drupe will not work as configured; the command exits 1). Checks never
print and never raise: the command renders them. Secrets are never shown, only where they are
expected to come from.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

import anyio

from drupe.errors import ConfigError, DrupeError
from drupe.settings import Settings

__all__ = ["Check", "run_checks"]

MCP_CONNECT_SECONDS = 15.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    level: Literal["ok", "warn", "fail"]
    message: str
    fix: str | None = None


def _config_checks(settings: Settings) -> list[Check]:
    from drupe.agent.models.config import config_path, load_model_config
    from drupe.agent.models.registry import ModelRegistry

    path = settings.config_path or config_path()
    try:
        config = load_model_config(settings.config_path)
    except ConfigError as err:
        return [
            Check(
                "config",
                "fail",
                str(err),
                f"fix or remove {str(path)!r} (see the file format in the README)",
            )
        ]
    checks = [
        Check(
            "config",
            "ok",
            f"read {str(config.path)!r}" if config.path else f"no file at {str(path)!r} (defaults)",
        )
    ]
    for provider in config.providers.values():
        if provider.source == "file" and not provider.has_key:
            checks.append(
                Check(
                    f"provider {provider.name}",
                    "fail",
                    "no API key",
                    provider.missing_key_message(),
                )
            )
        elif provider.is_configured:
            checks.append(Check(f"provider {provider.name}", "ok", "API key present"))
    if not any(p.is_configured for p in config.providers.values()):
        checks.append(
            Check(
                "providers",
                "warn",
                "no provider has an API key; only the local and scripted models are available",
                "set OPENAI_API_KEY, ANTHROPIC_API_KEY, ... or add [providers.<name>] to config",
            )
        )
    registry = ModelRegistry(config)
    default = registry.default_model_id()
    try:
        registry.resolve(default)
    except ConfigError as err:
        checks.append(
            Check(
                "default model", "fail", f"{default!r} cannot be used: {err}", "set default_model"
            )
        )
    else:
        checks.append(Check("default model", "ok", default))
    return checks


async def _database_checks(settings: Settings) -> list[Check]:
    """The database, and the providers stored in it (Settings -> Providers & models)."""
    from drupe.persistence.db import database_url, open_database

    try:
        shown = database_url(settings.database_url, data_dir=settings.data_dir)
    except DrupeError as err:
        return [Check("database", "fail", str(err), "pass a valid --database-url")]
    if "@" in shown:
        shown = shown.split("://", 1)[0] + "://…@" + shown.rsplit("@", 1)[1]
    try:
        async with open_database(settings.database_url, data_dir=settings.data_dir) as db:
            await db.conversations.list(limit=1)
            stored = await db.provider_settings.list()
            previous_keys = db.secrets.previous_keys
            stale = 0
            if previous_keys:
                stale = await db.provider_settings.reseal(dry_run=True)
                stale += await db.auth_sessions.reseal_id_tokens(dry_run=True)
    except DrupeError as err:
        return [
            Check(
                "database",
                "fail",
                str(err),
                "check that the server is running and the URL is right, then run: drupe db upgrade",
            )
        ]
    checks = [Check("database", "ok", f"{shown} opened and migrated")]
    old_keys = " and ".join(previous_keys)
    if previous_keys and stale:
        checks.append(
            Check(
                "secret keys",
                "warn",
                f"{stale} stored secret(s) are still sealed under a previous key ({old_keys})",
                "start the server once (it re-seals them under DRUPE_SECRET_KEY), then remove "
                f"{old_keys}",
            )
        )
    elif previous_keys:
        checks.append(
            Check(
                "secret keys",
                "ok",
                f"every stored secret is sealed under DRUPE_SECRET_KEY: {old_keys} can be removed",
            )
        )
    for setting in stored:
        name = f"provider {setting.name}"
        if setting.key_unreadable:
            checks.append(
                Check(
                    name,
                    "fail",
                    "stored in the database; its API key cannot be opened with this "
                    "process's secret key",
                    "run with the server's DRUPE_SECRET_KEY (or its --data-dir, which holds "
                    "secret.key), or enter the key again in Settings -> Providers & models",
                )
            )
        elif setting.api_key or setting.type == "openai-compatible":
            checks.append(Check(name, "ok", "stored in the database (wins over config.toml)"))
        else:
            checks.append(
                Check(
                    name,
                    "fail",
                    "stored in the database with no API key",
                    "enter its key in Settings -> Providers & models",
                )
            )
    return checks


async def _mcp_checks(settings: Settings) -> list[Check]:
    from drupe.agent.models.config import config_path
    from drupe.tools.mcp.config_file import load_mcp_servers

    path = settings.config_path or config_path()
    try:
        servers = load_mcp_servers(path)
    except ConfigError as err:
        return [Check("mcp", "fail", str(err), f"fix the [mcp.servers] tables in {str(path)!r}")]
    if not servers:
        return [Check("mcp", "ok", "no MCP servers configured")]
    from drupe.tools.mcp.catalog import McpCatalog

    checks: list[Check] = []
    async with McpCatalog(servers) as catalog:
        for server in servers:
            if not server.active:
                continue
            # A failure is recorded in the server's status, shown below.
            with anyio.move_on_after(MCP_CONNECT_SECONDS), suppress(DrupeError, OSError):
                await catalog.refresh(server.id)
        targets = {
            server.id: " ".join([server.command or "", *server.args]).strip()
            if server.transport == "stdio"
            else _without_secrets(str(server.url or ""))
            for server in servers
        }
        for status in catalog.status():
            name = f"mcp {status.id}"
            if not status.active:
                checks.append(Check(name, "ok", "inactive"))
            elif status.state == "connected":
                checks.append(Check(name, "ok", f"connected, {status.tool_count} tool(s)"))
            else:
                checks.append(
                    Check(
                        name,
                        "fail",
                        f"{status.state}: {status.last_error or 'no answer'}"
                        f" ({targets.get(status.id) or status.transport})",
                        f"check the command/url of [mcp.servers.{status.id}] and start it by "
                        "hand to see its own error",
                    )
                )
    return checks


def _without_secrets(url: str) -> str:
    """A URL as shown: no user info, no query (either may carry a token)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _channel_checks(settings: Settings) -> list[Check]:
    """Every ``[channels.<id>]`` table: parses, its env vars are set, its model can answer."""
    from drupe.agent.models.config import config_path, load_model_config
    from drupe.agent.models.registry import ModelRegistry
    from drupe.channels.config import check_channel_configs

    path = settings.config_path or config_path()
    try:
        models = ModelRegistry(load_model_config(settings.config_path))
    except ConfigError:
        return []  # the config check says what is wrong
    channels, problems = check_channel_configs(path, models.resolve)
    checks = [Check(f"channel {c.id}", "ok", f"{c.type} -> {c.target}") for c in channels]
    checks += [
        Check("channels", "fail", problem, "fix the table in the config file (drupe channel check)")
        for problem in problems
    ]
    return checks


REDIS_SECONDS = 5.0
_REDIS_MIN = (7, 0)


async def _redis_checks(settings: Settings) -> list[Check]:
    """Cluster mode's Redis (``DRUPE_REDIS_URL``): reachable, 7.0 or later (the chunk log's
    writes are Redis functions), no eviction, ``INFO`` allowed (each node asks Redis its run id
    to notice a restart), and what its persistence keeps (docs/deploy.md)."""
    url = settings.cluster.redis_url
    if url is None:
        return []
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    shown = _without_secrets(url)
    client = Redis.from_url(url, socket_timeout=REDIS_SECONDS, socket_connect_timeout=REDIS_SECONDS)
    try:
        try:
            await client.ping()
        except (OSError, RedisError) as err:
            return [
                Check(
                    "redis",
                    "fail",
                    f"{shown}: {err}",
                    "start Redis 7 or later, or fix DRUPE_REDIS_URL",
                )
            ]
        try:
            server = await client.info("server")
            persistence = await client.info("persistence")
        except (OSError, RedisError) as err:
            return [
                Check("redis", "ok", f"{shown} answers"),
                Check(
                    "redis restarts",
                    "warn",
                    f"INFO is not allowed ({err}): the nodes cannot notice that Redis restarted "
                    "until each live answer's next write, and its version is not known",
                    "allow INFO for Drupe's Redis user (and use Redis 7.0 or later)",
                ),
            ]
        version = str(server.get("redis_version", "0"))
        numbers = tuple(int(n) for n in version.split(".")[:2] if n.isdigit())
        if numbers < _REDIS_MIN:
            return [
                Check(
                    "redis",
                    "fail",
                    f"{shown}: Redis {version}; cluster mode needs 7.0 or later (Redis functions)",
                    "upgrade Redis",
                )
            ]
        checks = [Check("redis", "ok", f"{shown}: Redis {version}")]
        try:
            policy = str((await client.config_get("maxmemory-policy")).get("maxmemory-policy"))
        except (OSError, RedisError):
            checks.append(
                Check(
                    "redis eviction",
                    "warn",
                    "CONFIG GET is not allowed: cannot tell whether Redis may evict keys",
                    "make sure its maxmemory-policy is noeviction",
                )
            )
        else:
            if policy == "noeviction":
                checks.append(Check("redis eviction", "ok", "maxmemory-policy noeviction"))
            else:
                checks.append(
                    Check(
                        "redis eviction",
                        "warn",
                        f"maxmemory-policy {policy}: a full Redis may evict a lease, a log or a "
                        "turn's hash, which breaks ownership or a resume",
                        "set maxmemory-policy noeviction (a full Redis then fails writes visibly)",
                    )
                )
        aof = str(persistence.get("aof_enabled", "0")) == "1"
        checks.append(
            Check(
                "redis persistence",
                "ok",
                "AOF on"
                if aof
                else "no AOF: after a Redis restart the nodes write their live answers again; "
                "finished answers' logs (kept 5 minutes for late subscribers) are not restored, "
                "the answers themselves are in the database",
            )
        )
        return checks
    finally:
        await client.aclose()


async def run_checks(settings: Settings) -> list[Check]:
    """Every check, in the order they are shown."""
    checks = _config_checks(settings)
    checks.extend(_channel_checks(settings))
    database = await _database_checks(settings)
    if any(c.name.startswith("provider ") and c.level == "ok" for c in database):
        # A provider stored in the database serves models: not "only the local models".
        checks = [c for c in checks if c.name != "providers"]
    checks.extend(database)
    checks.extend(await _redis_checks(settings))
    checks.extend(await _mcp_checks(settings))
    return checks
