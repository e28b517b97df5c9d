"""Failover with real processes: an owner killed with ``kill -9``, and an owner frozen with
``SIGSTOP`` past its lease, in a 3-node cluster (lease TTL 3 s).

* kill -9 at random points of an answer: a subscriber on a surviving node gets a terminal (one
  ``error`` saying the node was lost, then ``[DONE]``) within the TTL plus the sweep, no row is
  left ``pending``, and what the subscriber saw is persisted (the takeover rebuilds the row from
  the chunk log);
* fencing: an owner frozen past its lease and then thawed writes nothing (its row stays as the
  takeover wrote it), and stops its stream.
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any

import httpx
import pytest

from tests.multinode.conftest import MakeCluster
from tests.multinode.harness import Cluster, Node

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(240)]

TTL = 3.0
SLOW = "scripted:lorem?words=400&rate=40"


@pytest.fixture(scope="module")
def failover(make_cluster: MakeCluster) -> Cluster:
    return make_cluster(size=3, balancer=False, env={"DRUPE_LEASE_TTL": str(TTL)})


class Reader(threading.Thread):
    """Reads one SSE response to its end, recording the events and when it ended."""

    def __init__(self, method: str, url: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(daemon=True)
        self.method, self.url, self.body = method, url, body
        self.events: list[Any] = []
        self.speaking = threading.Event()
        self.ended_at: float | None = None
        self.status: int | None = None
        self.error: httpx.HTTPError | None = None

    def run(self) -> None:
        try:
            with httpx.stream(self.method, self.url, json=self.body, timeout=60) as response:
                self.status = response.status_code
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        raw = line.removeprefix("data: ")
                        self.events.append(raw if raw == "[DONE]" else json.loads(raw))
                        if '"text-delta"' in raw:
                            self.speaking.set()
        except httpx.HTTPError as err:  # the node this reads from was killed
            self.error = err
        self.ended_at = time.monotonic()

    @property
    def text(self) -> str:
        return "".join(
            e["delta"] for e in self.events if isinstance(e, dict) and e["type"] == "text-delta"
        )


def _start_answer(owner: Node, follower: Node, conversation: str) -> tuple[Reader, Reader]:
    body = {
        "id": conversation,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        "models": [SLOW],
    }
    submit = Reader("POST", f"{owner.url}/api/chat", body)
    submit.start()
    assert submit.speaking.wait(30), "the owner never started answering"
    follow = Reader("GET", f"{follower.url}/api/chat/{conversation}/stream")
    follow.start()
    assert follow.speaking.wait(30), "the follower never saw the answer"
    return submit, follow


def _answer(node: Node, conversation: str) -> dict[str, Any]:
    messages = httpx.get(f"{node.url}/api/conversations/{conversation}", timeout=20).json()
    assert all(m["status"] != "pending" for m in messages["messages"])
    return [m for m in messages["messages"] if m["role"] == "assistant"][-1]


def _stored_text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def _ends_with_node_lost(reader: Reader) -> None:
    assert reader.events[-1] == "[DONE]"
    last = reader.events[-2]
    assert last["type"] == "error" and "lost" in last["errorText"], last


def test_kill_9_of_the_owner_at_random_points(failover: Cluster) -> None:
    rng = random.Random(9)
    takeovers: list[float] = []
    for round_ in range(3):
        owner, follower = failover.nodes[round_ % 3], failover.nodes[(round_ + 1) % 3]
        conversation = f"kill-{round_}"
        _submit, follow = _start_answer(owner, follower, conversation)
        time.sleep(rng.uniform(0.1, 1.5))  # a random point of the answer
        failover.kill9(owner)
        killed_at = time.monotonic()
        follow.join(30)
        assert follow.ended_at is not None, "the surviving subscriber got no terminal"
        takeovers.append(follow.ended_at - killed_at)
        _ends_with_node_lost(follow)
        answer = _answer(follower, conversation)
        assert answer["status"] == "error"
        stored = _stored_text(answer)
        seen = follow.text
        assert len(stored) >= 0.98 * len(seen) and seen.startswith(stored[: len(seen)])
        failover.restart(owner)
    # The goal (TTL + 2 s) is measured by bench/cluster_fanout.py; here only a sane bound.
    assert max(takeovers) < 4 * (TTL + 2), takeovers


def test_an_owner_frozen_past_its_lease_writes_nothing_when_thawed(failover: Cluster) -> None:
    owner, follower = failover.nodes[0], failover.nodes[1]
    submit, follow = _start_answer(owner, follower, "frozen")
    failover.sigstop(owner)
    try:
        follow.join(30)
        assert follow.ended_at is not None, "no takeover of the frozen owner"
        _ends_with_node_lost(follow)
        taken = _answer(follower, "frozen")
    finally:
        failover.sigcont(owner)
    # Thawed, the owner learns it lost the lease (its next renewal) and stops its stream.
    deadline = time.monotonic() + 30
    while httpx.get(f"{owner.url}/api/status", timeout=20).json()["liveStreams"]:
        assert time.monotonic() < deadline, "the thawed owner kept streaming"
        time.sleep(0.1)
    submit.join(30)
    assert submit.ended_at is not None
    after = _answer(follower, "frozen")
    assert (after["status"], after["parts"]) == (taken["status"], taken["parts"])
    assert _stored_text(after).startswith(follow.text), after["parts"]  # all it saw, kept
