"""``Coalescer``: the pure decision of when an owner writes its chunks to the shared chunk log.

Contract (cluster mode, ``docs/lifecycles/cluster.md``):

* Chunks are pushed in stream order with the time they were read (seconds, any monotonic clock).
  ``push`` returns the batch to write now, or ``None`` while text is still being gathered.
* Text, reasoning and tool-input deltas are held for at most ``window`` seconds after the first
  held chunk, or until ``max_bytes`` of delta text is held; any other chunk (a part boundary, a
  tool call, ``finish``, an error) is written at once, together with what was held before it, so
  structural chunks are never delayed and the order never changes.
* A written batch is the held chunks with each run of contiguous deltas of one part merged into
  one delta (``chunks.replay.merge_delta_runs``): folding the batch gives the same message as
  folding the chunks one by one.
* ``due`` says when the held text must be written even if no chunk arrives (the shell's timer);
  ``flush`` returns what is held (at the window's end or at the stream's end).

* Each pushed chunk may carry its stream ``seq`` (its cursor on the owner); after a batch is
  returned, ``batch_seqs`` holds one seq per batch chunk: the seq of the LAST chunk merged into
  it, so cursors stay unique and increasing across the log and a resume after any of them is
  exact.

Pure: no clock, no I/O. The shell (``chunk_log``) owns the timer and the Redis writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from drupe.chunks.replay import merge_delta_runs
from drupe.chunks.types import Chunk

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_WINDOW", "Coalescer"]

DEFAULT_WINDOW: Final = 0.025
"""Seconds a text delta may wait before it is written (the issue's bound: 25 ms)."""

DEFAULT_MAX_BYTES: Final = 16 * 1024
"""Delta text held before a write regardless of the window."""

_DELTA_TEXT: Final[dict[str, str]] = {
    "text-delta": "delta",
    "reasoning-delta": "delta",
    "tool-input-delta": "inputTextDelta",
}


@dataclass(slots=True)
class Coalescer:
    """Gathers deltas for at most ``window`` seconds; see the module docstring."""

    window: float = DEFAULT_WINDOW
    max_bytes: int = DEFAULT_MAX_BYTES
    _held: list[Chunk] = field(default_factory=list)
    _seqs: list[int] = field(default_factory=list)
    batch_seqs: list[int] = field(default_factory=list)
    """The seqs of the last returned batch (one per chunk)."""
    _held_bytes: int = 0
    _since: float | None = None

    @property
    def due(self) -> float | None:
        """When the held chunks must be written (``None`` when nothing is held)."""
        return None if self._since is None else self._since + self.window

    def push(self, chunk: Chunk, now: float, seq: int = 0) -> list[Chunk] | None:
        """Add one chunk read at ``now``; return the batch to write now, if any."""
        key = _DELTA_TEXT.get(chunk.get("type", ""))
        if key is None:
            self._held.append(chunk)
            self._seqs.append(seq)
            return self.flush()
        if self._since is not None and now >= self._since + self.window:
            batch = self.flush()
            self._hold(chunk, key, now, seq)
            return batch
        self._hold(chunk, key, now, seq)
        if self._held_bytes >= self.max_bytes:
            return self.flush()
        return None

    def flush(self) -> list[Chunk] | None:
        """Return everything held, merged, and start over (``None`` when nothing is held)."""
        if not self._held:
            return None
        batch = merge_delta_runs(self._held)
        self.batch_seqs = _run_end_seqs(self._held, self._seqs, batch)
        self._held = []
        self._seqs = []
        self._held_bytes = 0
        self._since = None
        return batch

    def _hold(self, chunk: Chunk, key: str, now: float, seq: int) -> None:
        if self._since is None:
            self._since = now
        self._held.append(chunk)
        self._seqs.append(seq)
        self._held_bytes += len(chunk.get(key, ""))


_RUN_ID: Final[dict[str, str]] = {
    "text-delta": "id",
    "reasoning-delta": "id",
    "tool-input-delta": "toolCallId",
}


def _run_end_seqs(held: list[Chunk], seqs: list[int], batch: list[Chunk]) -> list[int]:
    """The seq of the last held chunk behind each batch chunk (runs merge in order)."""
    out: list[int] = []
    i = 0
    for merged in batch:
        kind = merged.get("type", "")
        ident = _RUN_ID.get(kind)
        if ident is None:
            out.append(seqs[i])
            i += 1
            continue
        while (
            i + 1 < len(held)
            and held[i + 1].get("type") == kind
            and held[i + 1].get(ident) == merged.get(ident)
        ):
            i += 1
        out.append(seqs[i])
        i += 1
    return out
