"""``DRUPE_ON_OWNER_LOSS=retry`` with real processes: the owner is killed with ``kill -9`` in the
middle of an answer; a surviving node takes the turn over and answers the user message again.

The subscriber on the survivor keeps its one response: the partial answer, one transient
``data-retry`` chunk, then the whole new answer, ``finish`` and ``[DONE]``. The lost row keeps its
partial text (ended with one ``data-error`` part); the new answer is a sibling row, complete.
"""

from __future__ import annotations

import random
import time

import httpx
import pytest

from drupe.agent.models.scripted import lorem
from tests.multinode.conftest import MakeCluster
from tests.multinode.harness import Cluster
from tests.multinode.test_failover import Reader

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(240)]

TTL = 3.0
WORDS = 160
MODEL = f"scripted:lorem?words={WORDS}&rate=40"


@pytest.fixture(scope="module")
def retrying(make_cluster: MakeCluster) -> Cluster:
    env = {"DRUPE_LEASE_TTL": str(TTL), "DRUPE_ON_OWNER_LOSS": "retry"}
    return make_cluster(size=3, balancer=False, env=env)


def test_kill_9_of_the_owner_and_the_answer_completes_on_a_survivor(retrying: Cluster) -> None:
    owner, follower = retrying.nodes[0], retrying.nodes[1]
    body = {
        "id": "retry-1",
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        "models": [MODEL],
    }
    submit = Reader("POST", f"{owner.url}/api/chat", body)
    submit.start()
    assert submit.speaking.wait(30), "the owner never started answering"
    follow = Reader("GET", f"{follower.url}/api/chat/retry-1/stream")
    follow.start()
    assert follow.speaking.wait(30), "the follower never saw the answer"
    time.sleep(random.Random(11).uniform(0.2, 1.0))
    retrying.kill9(owner)
    follow.join(60)
    assert follow.ended_at is not None, "the surviving subscriber got no terminal"
    events = follow.events
    assert events[-1] == "[DONE]" and events[-2]["type"] == "finish", events[-3:]
    kinds = [e["type"] for e in events[:-1]]
    assert "error" not in kinds and kinds.count("data-retry") == 1
    at = kinds.index("data-retry")
    text = [e["delta"] if e["type"] == "text-delta" else "" for e in events[:-1]]
    seen_before, seen_after = "".join(text[:at]), "".join(text[at:])
    full = lorem(WORDS)
    assert seen_before and full.startswith(seen_before) and seen_before != full
    assert seen_after == full
    conversation = httpx.get(f"{follower.url}/api/conversations/retry-1", timeout=20).json()
    messages = conversation["messages"]
    assert all(m["status"] != "pending" for m in messages)
    answers = [m for m in messages if m["role"] == "assistant"]
    assert [m["status"] for m in answers] == ["error", "success"]
    lost, again = answers
    lost_text = "".join(p.get("text", "") for p in lost["parts"] if p["type"] == "text")
    assert len(lost_text) >= 0.98 * len(seen_before) and full.startswith(lost_text)
    assert "".join(p.get("text", "") for p in again["parts"] if p["type"] == "text") == full
    retrying.restart(owner)
