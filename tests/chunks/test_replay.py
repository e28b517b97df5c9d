"""``compact_replay``: merged, repaired replays that ``accumulate`` always accepts."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chunks.sequences import random_sequence
from drupe.chunks.accumulate import accumulate
from drupe.chunks.replay import compact_replay, merge_delta_runs
from drupe.chunks.types import Chunk, UIMessage


def _ring(chunks: list[Chunk], rng: random.Random) -> list[Chunk]:
    """What a replay ring may hold: some contiguous deltas of one part already merged."""
    out: list[Chunk] = []
    for chunk in chunks:
        prev = out[-1] if out else None
        key = {"text-delta": "id", "reasoning-delta": "id", "tool-input-delta": "toolCallId"}
        field = "inputTextDelta" if chunk["type"] == "tool-input-delta" else "delta"
        if (
            prev is not None
            and chunk["type"] in key
            and prev["type"] == chunk["type"]
            and prev[key[chunk["type"]]] == chunk[key[chunk["type"]]]
            and "providerMetadata" not in chunk
            and rng.random() < 0.7
        ):
            out[-1] = {**prev, field: prev[field] + chunk[field]}
        else:
            out.append(chunk)
    return out


@settings(max_examples=150, deadline=None)
@given(st.randoms(use_true_random=False))
def test_replay_without_eviction_rebuilds_the_same_message(rng: random.Random) -> None:
    chunks, seed = random_sequence(rng)
    expected = accumulate(chunks, seed=seed)
    assert accumulate(compact_replay(chunks, seed=seed), seed=seed) == expected
    ring = _ring(chunks, rng)
    assert accumulate(compact_replay(ring, seed=seed), seed=seed) == expected


def _texts_of(parts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(p["type"], p["text"]) for p in parts if p["type"] in ("text", "reasoning")]


def _expected_texts(kept: list[Chunk]) -> list[tuple[str, str]]:
    """The text and reasoning parts a late subscriber must see, folded by hand from the kept
    chunks: a ``*-start`` opens a part, a delta whose part opened in the evicted prefix opens
    one too (nothing of the prefix is known), every kept delta is appended, ``*-end`` closes."""
    parts: list[list[str]] = []
    open_parts: dict[tuple[str, str], int] = {}
    for chunk in kept:
        kind, _, event = chunk["type"].partition("-")
        if kind not in ("text", "reasoning"):
            continue
        key = (kind, chunk["id"])
        if event == "start" or (event == "delta" and key not in open_parts):
            open_parts[key] = len(parts)
            parts.append([kind, ""])
        if event == "delta":
            parts[open_parts[key]][1] += chunk["delta"]
        elif event == "end":
            open_parts.pop(key, None)
    return [(kind, text) for kind, text in parts]


def _tool_ids(chunks: list[Chunk], types: tuple[str, ...]) -> set[str]:
    return {c["toolCallId"] for c in chunks if c["type"] in types}


@settings(max_examples=150, deadline=None)
@given(st.randoms(use_true_random=False))
def test_replay_of_any_evicted_suffix_keeps_exactly_what_was_not_evicted(
    rng: random.Random,
) -> None:
    chunks, seed = random_sequence(rng)
    ring = _ring(chunks, rng)
    seed_parts = list(seed["parts"]) if seed is not None else []
    seed_tools = {p["toolCallId"] for p in seed_parts if "toolCallId" in p}
    for evicted in range(len(ring) + 1):
        kept = ring[evicted:]
        expected_texts = _expected_texts(kept)
        opened = _tool_ids(kept, ("tool-input-start",))
        mentioned = _tool_ids(kept, tuple(c["type"] for c in kept if c["type"].startswith("tool")))

        alone = accumulate(compact_replay(kept))
        assert _texts_of(alone["parts"]) == expected_texts
        alone_tools = {p["toolCallId"] for p in alone["parts"] if "toolCallId" in p}
        assert opened <= alone_tools <= mentioned  # orphans of the evicted prefix are dropped

        seeded = accumulate(compact_replay(kept, seed=seed), seed=seed)
        # the stored parts stay first; the kept chunks only add to them
        assert _texts_of(seeded["parts"]) == _texts_of(seed_parts) + expected_texts
        seeded_tools = {p["toolCallId"] for p in seeded["parts"] if "toolCallId" in p}
        assert seed_tools | opened <= seeded_tools <= seed_tools | mentioned
        if seed is not None:
            assert seeded["id"] == seed["id"]


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False))
def test_replay_never_mutates_entries(rng: random.Random) -> None:
    chunks, seed = random_sequence(rng)
    before = copy.deepcopy((chunks, seed))
    compact_replay(chunks[rng.randint(0, len(chunks)) :], seed=seed)
    assert (chunks, seed) == before


def test_delta_runs_merge_and_keep_the_last_provider_metadata() -> None:
    entries: list[Chunk] = [
        {"type": "text-delta", "id": "t", "delta": "a", "providerMetadata": {"p": {"v": 1}}},
        {"type": "text-delta", "id": "t", "delta": "b", "providerMetadata": {"p": {"v": 2}}},
        {"type": "text-delta", "id": "t", "delta": "c"},
        {"type": "text-delta", "id": "u", "delta": "d"},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{"},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "}"},
        {"type": "text-delta", "id": "t", "delta": "e"},
    ]
    assert merge_delta_runs(entries) == [
        {"type": "text-delta", "id": "t", "delta": "abc", "providerMetadata": {"p": {"v": 2}}},
        {"type": "text-delta", "id": "u", "delta": "d"},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{}"},
        {"type": "text-delta", "id": "t", "delta": "e"},
    ]
    assert merge_delta_runs(entries)[1] is entries[3]  # a lone delta passes through untouched


def test_heads_are_repaired_and_orphans_dropped() -> None:
    entries: list[Chunk] = [
        {"type": "text-delta", "id": "t", "delta": "llo", "executionId": "e1"},
        {"type": "text-delta", "id": "t", "delta": " world", "executionId": "e1"},
        {"type": "text-end", "id": "t", "executionId": "e1"},
        {"type": "reasoning-end", "id": "r"},
        {"type": "tool-input-delta", "toolCallId": "gone", "inputTextDelta": '"}'},
        {"type": "tool-output-available", "toolCallId": "gone", "output": 1},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "w", "input": {}},
        {"type": "tool-output-available", "toolCallId": "c", "output": 2},
        {"type": "finish-step"},
    ]
    assert compact_replay(entries) == [
        {"type": "start"},
        {"type": "text-start", "id": "t", "executionId": "e1"},
        {"type": "text-delta", "id": "t", "delta": "llo world", "executionId": "e1"},
        {"type": "text-end", "id": "t", "executionId": "e1"},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "w", "input": {}},
        {"type": "tool-output-available", "toolCallId": "c", "output": 2},
        {"type": "finish-step"},
    ]


def test_tool_chunks_for_parts_on_the_seed_are_kept() -> None:
    seed: UIMessage = {
        "id": "m1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "tool-w", "toolCallId": "c", "state": "input-streaming", "rawInput": '{"a'},
            {"type": "tool-x", "toolCallId": "d", "state": "input-available", "input": {}},
        ],
    }
    entries: list[Chunk] = [
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": '":1}'},
        {"type": "tool-output-available", "toolCallId": "d", "output": "ok"},
        {"type": "tool-output-available", "toolCallId": "e", "output": "orphan"},
    ]
    replay = compact_replay(entries, seed=seed)
    assert replay == [{"type": "start", "messageId": "m1"}, *entries[:2]]
    parts = accumulate(replay, seed=seed)["parts"]
    assert parts[1]["input"] == {"a": 1}
    assert parts[2]["output"] == "ok"
    assert compact_replay(entries) == [{"type": "start"}]  # without the seed they are orphans


def test_an_existing_start_is_not_duplicated() -> None:
    entries: list[Chunk] = [{"type": "start", "messageId": "m"}, {"type": "start-step"}]
    assert compact_replay(entries) == entries
