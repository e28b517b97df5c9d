"""Fixtures: real multi-node Drupe clusters (``harness.Cluster``), one fresh database each.

* ``cluster`` (module scope): 3 nodes + HAProxy, the scripted model (``scripted:echo`` by
  default), shared by the tests of one module. Tests that need their own settings use
  ``make_cluster(size=..., env={...}, balancer=..., config=...)``, which starts another cluster on
  another fresh database and prefix (closed at the end of the module).
* Every cluster gets its own PostgreSQL database ``drupe_mn_<hex>`` on the shared server named by
  ``DRUPE_TEST_POSTGRES_URL`` (created empty; the nodes migrate it; dropped afterwards) and its
  own key prefix on the Redis named by ``DRUPE_TEST_REDIS_URL`` (db 15; its keys are deleted
  afterwards, never the whole db).
* ``tests.multinode.services`` has the database and Redis parts on their own (for a test that
  starts ``drupe serve --workers N`` itself).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.multinode.harness import Cluster
from tests.multinode.services import (
    DEFAULT_CONFIG,
    delete_keys,
    drop_database,
    new_database,
    redis_url,
)

MakeCluster = Callable[..., Cluster]


@pytest.fixture(scope="module")
def make_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeCluster]:
    """``make_cluster(size=3, env=None, balancer=True, config=DEFAULT_CONFIG)``: a started
    cluster on a fresh database and prefix; everything it started is stopped at module end."""
    made: list[tuple[Cluster, str, str]] = []

    def make(
        size: int = 3,
        env: dict[str, str] | None = None,
        balancer: bool = True,
        config: str = DEFAULT_CONFIG,
    ) -> Cluster:
        work_dir = tmp_path_factory.mktemp("cluster")
        config_path = work_dir / "config.toml"
        config_path.write_text(config)
        database = new_database()
        prefix = f"drupe-mn-{uuid.uuid4().hex[:10]}"
        cluster = Cluster(
            database_url=database,
            redis_url=redis_url(),
            prefix=prefix,
            work_dir=work_dir,
            config=config_path,
            size=size,
            balancer=balancer,
            env=env or {},
        )
        made.append((cluster, database, prefix))
        cluster.start()
        return cluster

    try:
        yield make
    finally:
        for cluster, database, prefix in made:
            try:
                cluster.close()
            finally:
                drop_database(database)
                delete_keys(prefix)


@pytest.fixture(scope="module")
def cluster(make_cluster: MakeCluster) -> Cluster:
    """3 nodes and a balancer, shared by the module's tests (``scripted:echo`` by default; the
    schedule runners read the due schedules every second, ``DRUPE_SCHEDULE_POLL=1``)."""
    return make_cluster(env={"DRUPE_SCHEDULE_POLL": "1"})


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("multinode")
