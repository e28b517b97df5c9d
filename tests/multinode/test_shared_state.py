"""Three real nodes on one PostgreSQL database behind HAProxy (``harness.Cluster``): what holds
with each node running the single-node logic on shared rows.

* a conversation written through one node is read the same through the others and the balancer;
* the balancer routes request by request (no stickiness) and every node names itself;
* a whole turn through the balancer with the AI SDK's own client completes and is stored;
* scheduled tasks due at one instant fire exactly once across the three nodes (the claim).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.multinode.client import chat, text_of
from tests.multinode.harness import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(180)]

NODE_DIR = Path(__file__).parents[1] / "node"


def test_a_conversation_written_through_one_node_reads_the_same_everywhere(
    cluster: Cluster,
) -> None:
    first, second, third = cluster.nodes
    chat(first.url, "c-shared", "one")
    chat(second.url, "c-shared", "two")  # the next turn through another node
    views = [
        httpx.get(f"{url}/api/conversations/c-shared", timeout=20).json()
        for url in [*cluster.urls, cluster.balancer_url]
    ]
    expected = [
        ("user", "one", "success"),
        ("assistant", "You said: one", "success"),
        ("user", "two", "success"),
        ("assistant", "You said: two", "success"),
    ]
    for view in views:
        got = [(m["role"], text_of(m), m["status"]) for m in view["messages"]]
        assert got == expected
        assert view["messages"] == views[0]["messages"]
    listed = httpx.get(f"{third.url}/api/conversations", timeout=20).json()
    assert "c-shared" in [c["id"] for c in listed["items"]]


def test_each_node_names_itself_and_the_balancer_routes_every_request_anew(
    cluster: Cluster,
) -> None:
    nodes = [httpx.get(f"{url}/api/status", timeout=20).json()["node"] for url in cluster.urls]
    assert nodes == [{"mode": "cluster", "id": name} for name in ("node-1", "node-2", "node-3")]
    # One keep-alive client connection: round robin still sends each request to the next node.
    with httpx.Client(base_url=cluster.balancer_url, timeout=20) as client:
        seen = [client.get("/api/status").json()["node"]["id"] for _ in range(6)]
    assert sorted(seen[:3]) == ["node-1", "node-2", "node-3"]
    assert seen[3:] == seen[:3]


@pytest.mark.node
def test_a_turn_through_the_balancer_with_the_ai_sdk_client_is_stored(cluster: Cluster) -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node is not None and npm is not None, "this test needs node and npm on PATH"
    if not (NODE_DIR / "node_modules" / "ai" / "package.json").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True)
    result = subprocess.run(
        [node, str(NODE_DIR / "chat_turn.mjs"), cluster.balancer_url, "c-sdk", "over the lb"],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["text"] == "You said: over the lb"
    assert out["id"] == out["storedId"] and out["storedStatus"] == "success"
    assert out["storedText"] == "You said: over the lb"
    assert out["userTexts"] == ["over the lb"]


def test_schedules_due_at_one_instant_fire_exactly_once_across_the_nodes(
    cluster: Cluster,
) -> None:
    """Every node's runner reads the due schedules at least every second
    (``DRUPE_SCHEDULE_POLL=1``), so all three wake for the same occurrence and race to claim."""
    lb = httpx.Client(base_url=cluster.balancer_url, timeout=20)
    agent = lb.post("/api/agents", json={"name": "ticker", "modelId": "scripted:echo"}).json()
    at = (datetime.now(UTC) + timedelta(seconds=3)).isoformat()
    schedules = [
        lb.post(
            "/api/schedules",
            json={
                "agentId": agent["id"],
                "name": f"tick {i}",
                "prompt": f"tick {i}",
                "trigger": {"kind": "once", "at": at},
            },
        ).json()["id"]
        for i in range(6)
    ]

    def runs(schedule_id: str) -> list[dict[str, Any]]:
        return list(lb.get(f"/api/schedules/{schedule_id}/runs").json()["items"])

    deadline = time.monotonic() + 30
    while not all([r["status"] for r in runs(s)] == ["completed"] for s in schedules):
        # A wait for a state (every schedule has one finished run), polled.
        assert time.monotonic() < deadline, {s: runs(s) for s in schedules}
        time.sleep(0.2)
    every = {s: runs(s) for s in schedules}
    assert all(len(found) == 1 for found in every.values())  # exactly one run per occurrence
    fired = {s: found[0] for s, found in every.items()}
    assert {run["nodeId"] for run in fired.values()} <= {"node-1", "node-2", "node-3"}
    occurrence = datetime.fromisoformat(at)
    assert all(datetime.fromisoformat(r["scheduledFor"]) == occurrence for r in fired.values())
    for i, s in enumerate(schedules):
        conversation = lb.get(f"/api/conversations/{fired[s]['conversationId']}").json()
        turns = [(m["role"], text_of(m)) for m in conversation["messages"]]
        assert turns == [("user", f"tick {i}"), ("assistant", f"You said: tick {i}")]
    lb.close()


def test_a_booting_node_fails_only_its_own_running_task_runs(cluster: Cluster) -> None:
    """Last in the module: it restarts nodes. A run left ``running`` belongs to a node: another
    node's boot leaves it alone (it is live), its own node's next boot fails it. Meanwhile the
    balancer takes the dead node out of the rotation and back in."""
    first, second, _ = cluster.nodes
    agent = httpx.post(
        f"{first.url}/api/agents",
        json={"name": "slow", "modelId": "scripted:lorem?words=5000&rate=50"},
        timeout=20,
    ).json()
    run = httpx.post(
        f"{first.url}/api/agents/{agent['id']}/runs", json={"prompt": "go"}, timeout=20
    ).json()
    assert (run["status"], run["nodeId"]) == ("running", "node-1")

    def status() -> dict[str, Any]:
        return dict(httpx.get(f"{second.url}/api/runs/{run['id']}", timeout=20).json())

    cluster.restart(second)  # boots while node-1's run is live
    assert status()["status"] == "running"
    cluster.kill9(first)  # the run's node dies; its next life fails the run at boot
    assert status()["status"] == "running"  # nobody else decides for node-1
    cluster.wait_backend(first, "DOWN")  # the balancer's health check takes it out
    with httpx.Client(base_url=cluster.balancer_url, timeout=20) as client:
        answered = {client.get("/api/status").json()["node"]["id"] for _ in range(4)}
    assert answered == {"node-2", "node-3"}
    cluster.start_node(first)
    after = status()
    assert (after["status"], after["error"]) == ("failed", "the server stopped")
    cluster.wait_backend(first, "UP")
