"""Two (or more) real Drupe runtimes in one test process, in cluster mode, each on its own
uvicorn server on loopback, sharing a fresh PostgreSQL database and a per-test Redis prefix."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import orjson
from sqlalchemy.engine import make_url

from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.app.cluster_membership import ClusterMembership
from drupe.cluster.node import ClusterNode
from drupe.cluster.takeover import Takeover
from drupe.settings import AuthSettings, ClusterSettings, OwnerLoss, Settings
from drupe.testing.loopback import serve_app
from tests.cluster.conftest import redis_url

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """A new PostgreSQL database (dropped afterwards); yields its SQLAlchemy URL."""
    url = make_url(os.environ.get("DRUPE_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))
    name = f"drupe_cl_{uuid.uuid4().hex[:10]}"
    admin_dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield url.set(drivername="postgresql+asyncpg", database=name).render_as_string(
            hide_password=False
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@dataclass
class Node:
    name: str
    runtime: Runtime
    url: str

    @property
    def membership(self) -> ClusterMembership:
        membership = self.runtime.cluster
        assert isinstance(membership, ClusterMembership), "not a cluster node"
        return membership

    @property
    def cluster(self) -> ClusterNode:
        """The node's Redis side (its leases, log and connections)."""
        return self.membership.node

    @property
    def takeover(self) -> Takeover:
        """The node's takeover sweep."""
        return self.membership.takeover


@asynccontextmanager
async def cluster_nodes(
    tmp_path: Path,
    prefix: str,
    count: int = 2,
    *,
    lease_ttl: float = 3.0,
    redis: str | None = None,
    database_url: str | None = None,
    on_owner_loss: OwnerLoss = "error",
) -> AsyncIterator[list[Node]]:
    async with AsyncExitStack() as stack:
        if database_url is None:
            database_url = await stack.enter_async_context(fresh_database())
        nodes: list[Node] = []
        for index in range(count):
            name = f"n{index + 1}"
            data_dir = tmp_path / name
            data_dir.mkdir()
            config = data_dir / "config.toml"
            config.write_text('default_model = "scripted:echo"\n')
            settings = Settings(
                auth=AuthSettings(enabled=False),  # --no-auth on loopback: not about sign-in
                data_dir=data_dir,
                config_path=config,
                database_url=database_url,
                trace_store=False,
                run_scheduler=False,
                cluster=ClusterSettings(
                    redis_url=redis or redis_url(),
                    node_id=name,
                    lease_ttl=lease_ttl,
                    key_prefix=prefix,
                    on_owner_loss=on_owner_loss,
                ),
            )
            runtime = await stack.enter_async_context(open_runtime(settings))
            url = await stack.enter_async_context(serve_app(create_app(runtime)))
            nodes.append(Node(name, runtime, url))
        yield nodes


def sse_events(body: bytes) -> list[tuple[str | None, object]]:
    """An SSE body as ``(id, data)`` pairs; ``[DONE]`` is kept as the string."""
    events: list[tuple[str | None, object]] = []
    for frame in body.split(b"\n\n"):
        event_id: str | None = None
        data: object = None
        for line in frame.split(b"\n"):
            if line.startswith(b"id: "):
                event_id = line[4:].decode()
            elif line.startswith(b"data: "):
                raw = line[6:]
                data = raw.decode() if raw == b"[DONE]" else orjson.loads(raw)
        if data is not None:
            events.append((event_id, data))
    return events


def text_of(events: list[tuple[str | None, object]]) -> str:
    return "".join(
        str(d["delta"]) for _, d in events if isinstance(d, dict) and d.get("type") == "text-delta"
    )


async def lose_lease(node: Node, conversation_id: str) -> None:
    """Take ``node``'s lease on the conversation away as a successor does: the lease is gone AND
    the fencing counter moved past its token, in one transaction, so the node cannot take it
    back as if Redis had merely lost its data (``RedisLease.reacquire``)."""
    cluster = node.cluster
    async with cluster.redis.pipeline(transaction=True) as pipe:
        pipe.delete(cluster.lease.lease_key(conversation_id))
        pipe.incr(cluster.lease.fence_key(conversation_id))
        await pipe.execute()
