"""Cluster mode's boot rules: Redis with PostgreSQL only, a reachable Redis, a unique node id."""

from __future__ import annotations

import uuid

import anyio
import pytest

from drupe.cluster.node import NODE_CONNECTIONS, ClusterNode, default_node_id
from drupe.errors import ConfigError
from drupe.settings import ClusterSettings, Settings
from tests.cluster.conftest import redis_url


def test_cluster_mode_with_sqlite_is_refused_with_what_to_change() -> None:
    settings = Settings(cluster=ClusterSettings(redis_url="redis://127.0.0.1:6379/15"))
    with pytest.raises(ConfigError, match="needs a PostgreSQL --database-url"):
        settings.check()


def test_the_embedded_default_needs_no_redis() -> None:
    Settings().check()  # SQLite, no Redis: nothing to refuse
    assert not Settings().cluster.enabled


def test_cluster_settings_come_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "DRUPE_REDIS_URL": "redis://r:6379/0",
            "DRUPE_DATABASE_URL": "postgresql+asyncpg://u@h/db",
            "DRUPE_NODE_ID": "n1",
            "DRUPE_LEASE_TTL": "3.5",
            "DRUPE_COALESCE_MS": "10",
            "DRUPE_REDIS_PREFIX": "team-a",
            "DRUPE_ON_OWNER_LOSS": " Retry",
        }
    )
    settings.check()
    assert settings.cluster == ClusterSettings(
        redis_url="redis://r:6379/0",
        node_id="n1",
        lease_ttl=3.5,
        coalesce_window=0.01,
        key_prefix="team-a",
        on_owner_loss="retry",
    )


def test_an_unknown_owner_loss_policy_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"DRUPE_ON_OWNER_LOSS='resume'.*'error' or 'retry'"):
        Settings.from_env({"DRUPE_ON_OWNER_LOSS": "resume"})
    settings = Settings(cluster=ClusterSettings(on_owner_loss="resume"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="DRUPE_ON_OWNER_LOSS must be one of error, retry"):
        settings.check()
    assert Settings().cluster.on_owner_loss == "error"  # the default ends lost answers


def test_node_ids_differ_per_process_and_never_hold_the_lease_separator() -> None:
    assert default_node_id() != default_node_id()
    assert "|" not in ClusterNode(ClusterSettings(redis_url="redis://x", node_id="a|b")).node_id


@pytest.mark.redis
async def test_a_node_connects_and_reads_with_one_reader() -> None:
    async with ClusterNode(ClusterSettings(redis_url=redis_url(), node_id="t1")) as node:
        assert await node.redis.ping()
        assert node.reader.keys == []
        assert node.node_id == "t1"


async def test_an_unreachable_redis_fails_the_boot_without_leaking_the_password() -> None:
    settings = ClusterSettings(redis_url="redis://user:s3cret@127.0.0.1:1/0")
    with pytest.raises(ConfigError, match="cannot reach Redis") as caught:
        async with ClusterNode(settings):
            pass
    assert "s3cret" not in str(caught.value)


@pytest.mark.redis
async def test_a_burst_past_the_pool_waits_for_a_connection_instead_of_failing() -> None:
    """300 commands at once, each holding its connection 50 ms (``BLPOP`` of an empty list):
    more than the pool holds, so some wait for a free connection; none fails."""
    async with ClusterNode(ClusterSettings(redis_url=redis_url(), node_id="t2")) as node:
        key = f"drupe-test-burst-{uuid.uuid4().hex}"
        answers: list[object] = []

        async def one() -> None:
            answers.append(await node.redis.blpop([key], timeout=0.05))

        async with anyio.create_task_group() as group:
            for _ in range(300):
                group.start_soon(one)
    assert answers == [None] * 300
    assert NODE_CONNECTIONS < 300  # the burst is past the pool
