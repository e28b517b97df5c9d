"""``GoneNodes``: a node is gone only after its heartbeat was missing for a whole TTL."""

from __future__ import annotations

from drupe.cluster.gone_nodes import GoneNodes


def test_a_node_is_gone_after_a_whole_ttl_of_missing_heartbeats() -> None:
    rule = GoneNodes(ttl=10.0)
    assert rule.observe({"a": False, "b": True}, 100.0) == set()
    assert rule.observe({"a": False, "b": True}, 109.9) == set()
    assert rule.observe({"a": False, "b": True}, 110.0) == {"a"}
    assert rule.observe({"a": False, "b": False}, 111.0) == {"a"}  # b just started missing


def test_a_heartbeat_seen_again_resets_the_node() -> None:
    rule = GoneNodes(ttl=10.0)
    rule.observe({"a": False}, 100.0)
    assert rule.observe({"a": True}, 105.0) == set()  # a Redis restart: the node beat again
    assert rule.observe({"a": False}, 106.0) == set()
    assert rule.observe({"a": False}, 115.9) == set()
    assert rule.observe({"a": False}, 116.0) == {"a"}


def test_a_node_no_longer_observed_is_forgotten() -> None:
    rule = GoneNodes(ttl=10.0)
    rule.observe({"a": False}, 100.0)
    assert rule.observe({}, 105.0) == set()
    assert rule.observe({"a": False}, 111.0) == set()  # counted again from its first new look
    assert rule.missing_since == {"a": 111.0}
