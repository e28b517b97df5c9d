"""Compact replay: turn a replay ring's content into a chunk run a late subscriber can fold.

Owns: ``compact_replay``. Its input is what a replay ring holds for one execution: the stream's
chunks in order, where contiguous deltas of one part may already be merged, and whose oldest
entries may have been evicted (so a part's opening chunk, or ``start`` itself, may be gone). Its
output:

- merges each run of contiguous deltas of one part (same type and ``id`` / ``toolCallId``) into one
  delta chunk (the last non-null ``providerMetadata`` of the run is kept, which is what folding
  the run one by one would leave on the part);
- synthesizes a ``start`` when there is none (with the seed's id when a seed is given);
- synthesizes ``text-start`` / ``reasoning-start`` before a delta whose part was opened in the
  evicted prefix, and drops ``text-end`` / ``reasoning-end`` of such parts;
- keeps tool chunks whose part exists (on the seed message, or opened by a kept chunk) and drops
  the others, which the AI SDK would reject.

Guarantee: ``accumulate(compact_replay(entries, seed=s), seed=s)`` never raises, whatever prefix
was evicted; when nothing was evicted it equals ``accumulate(entries, seed=s)``. The guarantee
holds by construction: every output chunk has been folded by an ``Accumulator`` seeded the same
way (its ``push`` is atomic, so a rejected chunk leaves no trace).

Must never: mutate an entry (merged chunks are new dicts; untouched entries are passed through).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from drupe.chunks.accumulate import AccumulateError, Accumulator
from drupe.chunks.types import Chunk, UIMessage

__all__ = ["compact_replay", "merge_delta_runs"]

_DELTA_KEYS: Final[dict[str, tuple[str, str]]] = {
    "text-delta": ("id", "delta"),
    "reasoning-delta": ("id", "delta"),
    "tool-input-delta": ("toolCallId", "inputTextDelta"),
}
_START_OF: Final[dict[str, str]] = {
    "text-delta": "text-start",
    "reasoning-delta": "reasoning-start",
}


def _merge_run(run: list[Chunk]) -> Chunk:
    if len(run) == 1:
        return run[0]
    text_key = _DELTA_KEYS[run[0]["type"]][1]
    merged = dict(run[0])
    merged[text_key] = "".join(chunk[text_key] for chunk in run)
    for chunk in reversed(run):
        metadata = chunk.get("providerMetadata")
        if metadata is not None:
            merged["providerMetadata"] = metadata
            break
    return merged


def merge_delta_runs(entries: Sequence[Chunk]) -> list[Chunk]:
    """Merge every run of contiguous deltas of one part into one delta chunk."""
    out: list[Chunk] = []
    run: list[Chunk] = []
    run_key: tuple[str, Any] | None = None
    for chunk in entries:
        keys = _DELTA_KEYS.get(chunk["type"])
        key = None if keys is None else (chunk["type"], chunk.get(keys[0]))
        if key is not None and key == run_key:
            run.append(chunk)
            continue
        if run:
            out.append(_merge_run(run))
        if key is None:
            out.append(chunk)
            run, run_key = [], None
        else:
            run, run_key = [chunk], key
    if run:
        out.append(_merge_run(run))
    return out


def _opening_for(delta: Chunk) -> Chunk:
    """A ``text-start`` / ``reasoning-start`` with the delta's envelope keys (id, executionId)."""
    opening = {k: v for k, v in delta.items() if k not in ("delta", "providerMetadata")}
    opening["type"] = _START_OF[delta["type"]]
    return opening


def compact_replay(entries: Sequence[Chunk], *, seed: UIMessage | None = None) -> list[Chunk]:
    """Compact a replay ring's chunks into a run ``accumulate(..., seed=seed)`` always accepts."""
    merged = merge_delta_runs(entries)
    accumulator = Accumulator(seed)
    out: list[Chunk] = []
    if not any(chunk["type"] == "start" for chunk in merged):
        start: Chunk = {"type": "start"}
        if seed is not None and isinstance(seed.get("id"), str):
            start["messageId"] = seed["id"]
        accumulator.push(start)
        out.append(start)
    for chunk in merged:
        try:
            accumulator.push(chunk)
        except AccumulateError:
            if chunk["type"] not in _START_OF:
                continue  # an orphan end or tool chunk: the SDK would reject it
            opening = _opening_for(chunk)
            try:
                accumulator.push(opening)
                accumulator.push(chunk)
            except AccumulateError:  # pragma: no cover - an opening always makes the delta valid
                continue
            out.append(opening)
        out.append(chunk)
    return out
