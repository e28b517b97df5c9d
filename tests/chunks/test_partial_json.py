"""``parse_partial_json`` / ``fix_json`` equal the AI SDK's ``parsePartialJson`` under Node."""

from __future__ import annotations

import json
import random

import pytest

from chunks.conftest import NodeRunner
from drupe.chunks.partial_json import UNDEFINED, fix_json, parse_partial_json

DOCUMENTS = [
    {"city": "San Francisco", "units": "metric", "days": [1, 2, 3]},
    {"nested": {"a": [True, False, None], "b": {"c": -1.25e-3}}, "empty": {}, "list": []},
    {"text": 'quote " backslash \\ newline \n tab \t unicode é 🌍 \u0001', "k": 0},
    [1, "two", {"three": 3.0}, [None], -0.5, 12345678901234567890],
    "just a string with \\u escapes \u00e9",
    -42.5e10,
    True,
    None,
    {"__proto__": {"polluted": True}},
    {"a": {"constructor": {"prototype": {"x": 1}}}},
    {"constructor": "fine", "prototype": 1},
]


def _texts() -> list[str]:
    texts: list[str] = []
    for document in DOCUMENTS:
        for ascii_only in (True, False):
            text = json.dumps(document, ensure_ascii=ascii_only)
            texts += [text[:i] for i in range(len(text) + 1)]
    texts += [
        "",
        "   ",
        "{",
        "[",
        '{"a"',
        '{"a":',
        "tr",
        "nul",
        "-",
        "1e",
        "[1,",
        "{}x",
        "NaN",
        "[Infinity",
    ]
    texts += ['{"a": 1} trailing', "[1, 2,, 3]", "{'single': 1}", '{"a": tru', '"\\ud83c']
    rng = random.Random(7)
    alphabet = '{}[]",:0123456789.-eEtrufalsn \\u"ab'
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(400)]
    return texts


@pytest.mark.node
def test_parse_partial_json_equals_the_sdk(read_ui_message_stream: NodeRunner) -> None:
    texts = _texts()
    results = read_ui_message_stream(texts, "partial_json.mjs")
    assert len(results) == len(texts)
    for text, result in zip(texts, results, strict=True):
        mine = parse_partial_json(text)
        if result["defined"]:
            assert mine is not UNDEFINED and mine == result["value"], text
        else:
            assert mine is UNDEFINED, text


def test_fix_json_closes_open_structures() -> None:
    assert fix_json('{"a": [1, tr') == '{"a": [1, true]}'
    assert fix_json('{"a": "x') == '{"a": "x"}'
    assert fix_json('{"a": -') == "{}"  # a lone minus is not yet a value
    assert fix_json('{"a": 12.') == '{"a": 12}'
    assert fix_json('["x\\u00') == '["x"]'
    assert fix_json("") == ""


def test_parse_partial_json_follows_json_parse() -> None:
    assert parse_partial_json(None) is UNDEFINED
    assert parse_partial_json("NaN") is UNDEFINED
    assert parse_partial_json('{"__proto__": {}}') is UNDEFINED
    assert parse_partial_json("12345678901234567890") == 1.2345678901234567e19
    assert parse_partial_json('{"a": [1, {"b": "c') == {"a": [1, {"b": "c"}]}
    assert parse_partial_json('{"a": 1} x') == {"a": 1}
