"""Task runs left ``running`` at boot: one process fails them all; a cluster node fails only its
own earlier life's (other nodes' runs may be live), and the sweep fails the runs of gone nodes."""

from __future__ import annotations

from datetime import UTC, datetime

from drupe.persistence import Database

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 1, 12, 5, tzinfo=UTC)


async def _runs(database: Database, nodes: dict[str, str | None]) -> None:
    """One ``running`` manual run per id, started by the given node (None: no cluster)."""
    for run_id, node in nodes.items():
        database.schedules.node_id = node
        run = await database.schedules.start_run(kind="manual", started_at=T0, run_id=run_id)
        assert run.node_id == node
    database.schedules.node_id = None


async def _statuses(database: Database, ids: list[str]) -> dict[str, str]:
    out = {}
    for run_id in ids:
        record = await database.schedules.get_run(run_id)
        assert record is not None
        out[run_id] = record.status
    return out


NODES: dict[str, str | None] = {"r-a": "node-a", "r-a2": "node-a", "r-b": "node-b", "r-x": None}


async def test_a_single_process_fails_every_running_run(database: Database) -> None:
    await _runs(database, NODES)
    assert await database.schedules.fail_running(LATER, "the server stopped") == 4
    assert set((await _statuses(database, list(NODES))).values()) == {"failed"}
    failed = await database.schedules.get_run("r-b")
    assert failed is not None and failed.error == "the server stopped"
    assert failed.finished_at == LATER


async def test_a_cluster_node_fails_only_its_own_runs(database: Database) -> None:
    await _runs(database, NODES)
    assert await database.schedules.fail_running(LATER, "x", node_id="node-a", all_nodes=False) == 2
    assert await _statuses(database, list(NODES)) == {
        "r-a": "failed",
        "r-a2": "failed",
        "r-b": "running",
        "r-x": "running",
    }


async def test_the_sweep_fails_the_runs_of_gone_nodes(database: Database) -> None:
    await _runs(database, NODES)
    await database.schedules.finish_run("r-a2", status="completed", finished_at=T0)
    assert await database.schedules.fail_running_of_gone_nodes(LATER, "node gone", ["node-a"]) == 2
    assert await _statuses(database, list(NODES)) == {
        "r-a": "running",
        "r-a2": "completed",
        "r-b": "failed",
        "r-x": "failed",
    }
    assert await database.schedules.fail_running_of_gone_nodes(LATER, "node gone", []) == 1
