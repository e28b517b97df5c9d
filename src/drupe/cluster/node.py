"""``ClusterNode``: one process's membership in a Drupe cluster (``docs/deploy.md``).

Contract:

* ``async with ClusterNode(settings) as node`` connects to Redis (``PING`` first, so a wrong
  URL fails the boot with a clear ``ConfigError``), and owns every Redis resource of the
  process: the command client ``redis`` (a pool), the reader's dedicated connection, the lease
  manager ``lease``, the chunk log ``log`` and the per-node reader ``reader``.
* The command client holds at most ``NODE_CONNECTIONS`` connections; a burst of more commands
  at once (hundreds of subscribers attaching together, each replaying its turn) waits for a
  free connection, up to ``POOL_WAIT`` seconds, instead of failing (redis-py's default pool
  refuses the 101st concurrent command with ``MaxConnectionsError``).
* ``node_id`` names the process in leases and routing; it is unique per process (the settings'
  ``node_id`` or ``<host>-<pid>-<random>``).
* Leaving closes the reader first, then the connections. Nothing here decides ownership or
  routes commands: the parts that do (``drupe.cluster.*``) take the node's resources.
"""

from __future__ import annotations

import os
import secrets
import socket
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

from drupe.cluster.chunk_log import RedisChunkLog
from drupe.cluster.lease import RedisLease
from drupe.cluster.reader import NodeReader
from drupe.errors import ConfigError

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from drupe.settings import ClusterSettings

__all__ = ["NODE_CONNECTIONS", "POOL_WAIT", "ClusterNode", "default_node_id"]

NODE_CONNECTIONS: Final = 128
"""Connections of a node's command client at most."""
POOL_WAIT: Final = 20.0
"""Seconds a command waits for a free connection before it fails."""


def default_node_id() -> str:
    """``<host>-<pid>-<4 random hex>``: unique per process, readable in logs."""
    host = socket.gethostname().split(".")[0] or "node"
    return f"{host}-{os.getpid()}-{secrets.token_hex(2)}".replace("|", "-")


class ClusterNode:
    """This process's Redis resources; see the module docstring."""

    def __init__(self, settings: ClusterSettings) -> None:
        if settings.redis_url is None:
            raise ConfigError("cluster mode needs a Redis URL (--redis-url / DRUPE_REDIS_URL)")
        if settings.lease_ttl <= 0:
            raise ConfigError("the lease TTL must be positive (DRUPE_LEASE_TTL)")
        self.settings = settings
        self.node_id = (settings.node_id or default_node_id()).replace("|", "-")
        self.prefix = settings.key_prefix
        self._redis: Redis | None = None
        self._reader_conn: Redis | None = None
        self._reader: NodeReader | None = None
        self.lease: RedisLease
        self.log: RedisChunkLog

    @property
    def redis(self) -> Redis:
        if self._redis is None:
            raise RuntimeError("ClusterNode is not running (use `async with`)")
        return self._redis

    @property
    def reader(self) -> NodeReader:
        if self._reader is None:
            raise RuntimeError("ClusterNode is not running (use `async with`)")
        return self._reader

    async def __aenter__(self) -> Self:
        from redis.asyncio import BlockingConnectionPool, Redis
        from redis.exceptions import RedisError

        url = self.settings.redis_url
        assert url is not None
        pool = BlockingConnectionPool.from_url(
            url, max_connections=NODE_CONNECTIONS, timeout=POOL_WAIT, health_check_interval=30
        )
        self._redis = Redis.from_pool(pool)
        try:
            await self._redis.ping()
        except (OSError, RedisError) as err:
            await self._redis.aclose()
            self._redis = None
            raise ConfigError(f"cannot reach Redis at {_safe(url)}: {err}") from err
        self._reader_conn = Redis.from_url(url, single_connection_client=True)
        self.lease = RedisLease(self._redis, prefix=self.prefix, ttl=self.settings.lease_ttl)
        self.log = RedisChunkLog(self._redis, prefix=self.prefix)
        self._reader = NodeReader(self._redis, self._reader_conn, self.log)
        await self._reader.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._reader is not None:
                await self._reader.__aexit__(exc_type, exc, tb)
        finally:
            self._reader = None
            if self._reader_conn is not None:
                await self._reader_conn.aclose()
            if self._redis is not None:
                await self._redis.aclose()
            self._reader_conn = self._redis = None


def _safe(url: str) -> str:
    """The URL without its password (never log secrets)."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user + ':***@' if user else '***@'}{host}"
