"""The merge rule of cluster status (pure), and Redis's script agreeing with it."""

from __future__ import annotations

import orjson
import pytest
from redis.asyncio import Redis

from drupe.cluster.node import ClusterNode
from drupe.cluster.status import ClusterStatus, StatusKeys
from drupe.cluster.status_record import (
    ClusterRecord,
    decode_record,
    supersedes,
    turn_order,
)
from drupe.settings import ClusterSettings
from drupe.streaming.contracts import StatusRecord
from tests.cluster.conftest import redis_url


def rec(turn_id: str, status: str = "done") -> ClusterRecord:
    return ClusterRecord("c", status, turn_id, node="n", at=1.0)


# (stored turn, incoming turn, accepted): written out by hand, not computed.
CASES = [
    ("1000:1", "1000:1", True),  # the same turn always replaces
    ("1000:1", "1001:1", True),  # a newer turn
    ("1001:1", "1000:9", False),  # an older turn, whatever its sequence
    ("1000:2", "1000:3", True),  # same millisecond: the sequence decides
    ("1000:3", "1000:2", False),
    ("999:1", "1000:1", True),  # numbers, not strings ("999" > "1000" as text)
    ("1000:1", "999:1", False),
    ("1000:2", "1000:02", False),  # another id of the same order: not newer, refused
    ("odd", "1000:1", True),  # another shape: Redis order decides
    ("1000:1", "odd", True),
]


@pytest.mark.parametrize(("stored", "incoming", "accepted"), CASES)
def test_supersedes(stored: str, incoming: str, accepted: bool) -> None:
    assert supersedes(rec(stored), rec(incoming)) is accepted
    assert supersedes(None, rec(incoming))


def test_turn_order_reads_epoch_ms_and_sequence() -> None:
    assert turn_order("1764612345123:42") == (1764612345123, 42)
    assert turn_order("1:2:3") is None and turn_order("") is None and turn_order("a:1") is None


def test_the_wire_form_decodes_to_the_record() -> None:
    wire = (
        b'{"conversationId":"c1","status":"streaming","turnId":"5:1","node":"a",'
        b'"lastCompletedAt":3.0,"at":12.5,"seq":7}'
    )  # as the status script writes it (tests/cluster/test_status.py checks the script)
    decoded = decode_record(wire)
    assert decoded == ClusterRecord("c1", "streaming", "5:1", "a", 12.5, 3.0, seq=7)
    assert decoded.live and not rec("1:1").live


def test_a_record_without_sequence_or_completion_decodes_with_their_defaults() -> None:
    raw = b'{"conversationId":"c","status":"streaming","turnId":"1:1","node":"n","at":2.0,'
    decoded = decode_record(raw + b'"lastCompletedAt":null}')
    assert decoded == ClusterRecord("c", "streaming", "1:1", "n", 2.0, None, seq=0)


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"status": "done"}', b"null"])
def test_a_malformed_record_is_a_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError, match="malformed"):
        decode_record(raw)


@pytest.mark.redis
async def test_the_redis_script_applies_the_same_rule(redis: Redis, prefix: str) -> None:
    settings = ClusterSettings(redis_url=redis_url(), node_id="a", key_prefix=prefix)
    async with ClusterNode(settings) as node, ClusterStatus(node) as status:
        for index, (stored, incoming, accepted) in enumerate(CASES):
            cid = f"case-{index}"
            status.observe(cid, StatusRecord("streaming", stored))
            await status.flush()
            refused = status.writer.refused
            status.observe(cid, StatusRecord("done", incoming))
            await status.flush()
            value = orjson.loads(await redis.hget(StatusKeys(prefix).hash, cid))
            assert value["turnId"] == (incoming if accepted else stored), (stored, incoming)
            assert status.writer.refused == refused + (0 if accepted else 1)
