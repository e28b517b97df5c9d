"""``merge_objects``: the SDK's deep merge of message metadata."""

from __future__ import annotations

import pytest

from drupe.chunks.metadata import MetadataMergeError, merge_objects
from drupe.chunks.partial_json import UNDEFINED


def test_objects_merge_deeply_and_the_rest_is_replaced() -> None:
    base = {"a": 1, "usage": {"in": 1, "d": {"x": 1}}, "tags": ["a"], "keep": {"k": 1}}
    over = {"usage": {"out": 2, "d": {"y": 2}}, "tags": ["b"], "a": {"now": "object"}, "n": None}
    merged = merge_objects(base, over)
    assert merged == {
        "a": {"now": "object"},
        "usage": {"in": 1, "out": 2, "d": {"x": 1, "y": 2}},
        "tags": ["b"],
        "keep": {"k": 1},
        "n": None,
    }
    assert base == {"a": 1, "usage": {"in": 1, "d": {"x": 1}}, "tags": ["a"], "keep": {"k": 1}}
    assert merged["keep"] is base["keep"]  # unchanged values are shared, never copied


def test_prototype_keys_are_skipped() -> None:
    over = {"__proto__": {"x": 1}, "constructor": 1, "prototype": 2, "ok": 3}
    assert merge_objects({}, over) == {"ok": 3}


def test_undefined_sides() -> None:
    assert merge_objects(UNDEFINED, {"a": 1}) == {"a": 1}
    assert merge_objects({"a": 1}, UNDEFINED) == {"a": 1}
    assert merge_objects(UNDEFINED, UNDEFINED) is UNDEFINED


def test_javascript_spread_quirks() -> None:
    assert merge_objects({"a": 1}, "xy") == {"a": 1, "0": "x", "1": "y"}
    assert merge_objects([10, 20], {"0": {"a": 1}}) == {"0": {"a": 1}, "1": 20}
    assert merge_objects(5, 6) == {}
    with pytest.raises(MetadataMergeError):
        merge_objects("plain", {"a": 1})
