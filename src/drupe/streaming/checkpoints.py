"""Checkpoints of live answers: the accumulated message is saved while it streams (R1).

Owns ``CheckpointPolicy`` (when a checkpoint is due: pure, explicit limits), ``CheckpointTrack``
(what one answer has not saved yet) and ``Checkpointer`` (the async shell: ONE owned task that
writes every due checkpoint). The persistence listener folds each chunk into its own
accumulator and calls ``changed``; that is all the fan-out ever does (no await, no I/O).

A change waits at most ``interval`` seconds and at most ``max_bytes`` bytes of stream (the
chunks' JSON); it is written sooner once the unsaved bytes reach both ``min_bytes`` and
``max_loss`` of the message's bytes, so a crash loses at most about ``max_loss`` of what
subscribers saw (plus one write's latency). A change may be written up to ``coalesce`` of the
interval early, so the checkpoints of many answers share one batch. A track with no change since
its last checkpoint is never written.

The writer loop takes the due tracks, serializes each message once, groups them by sink and
hands each sink ONE batch (``CheckpointSink.write_checkpoints``: one coalesced statement, only
into rows that are still ``pending``, so a checkpoint that races the terminal write can never
undo it). A write is bounded by ``write_timeout``; a failed or timed-out batch is logged and its
tracks are marked dirty again (retried after ``interval``). Batches hold at most ``max_batch``
tracks. Closing a track (the answer reached its terminal) stops its checkpoints.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.abc

from drupe.lifetimes import TaskOwner

__all__ = ["CheckpointPolicy", "CheckpointSink", "CheckpointTrack", "Checkpointer"]

log = logging.getLogger(__name__)


class CheckpointSink(Protocol):
    """Where checkpoints go (the message store): a batch of ``(row key, parts JSON)``."""

    async def write_checkpoints(self, batch: Sequence[tuple[str, str]]) -> int:
        """Write each row's parts if the row is still ``pending``; return the rows changed."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointPolicy:
    """When a live answer's checkpoint is due. ``interval <= 0`` turns checkpoints off."""

    interval: float = 1.0
    """Longest wait, in seconds, of a change before it is written."""
    max_bytes: int = 16_384
    """Most unsaved stream bytes (chunk JSON) before a checkpoint is due."""
    max_loss: float = 0.02
    """A checkpoint is also due once the unsaved bytes are this fraction of the message's..."""
    min_bytes: int = 512
    """...and at least this many bytes (so small, slow answers are written once per interval)."""
    coalesce: float = 0.25
    """Fraction of ``interval`` by which a checkpoint may be written early to join a batch."""
    write_timeout: float = 10.0
    """Bound of one batch write, in seconds."""
    max_batch: int = 1_000
    """Most rows in one batch (one transaction)."""

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.min_bytes < 1 or self.max_batch < 1:
            raise ValueError("checkpoint max_bytes, min_bytes and max_batch must be >= 1")
        if not 0 <= self.max_loss < 1:
            raise ValueError("checkpoint max_loss must be in [0, 1)")
        if not 0 <= self.coalesce <= 1:
            raise ValueError("checkpoint coalesce must be in [0, 1]")
        if self.write_timeout <= 0:
            raise ValueError("checkpoint write_timeout must be > 0")

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def due_by_bytes(self, unsaved: int, total: int) -> bool:
        """Whether the unsaved bytes alone make a checkpoint due now."""
        if unsaved >= self.max_bytes:
            return True
        return unsaved >= self.min_bytes and unsaved >= self.max_loss * total

    def threshold(self, saved: int) -> int:
        """The unsaved bytes that make a checkpoint due when ``saved`` bytes are saved: the
        same rule as ``due_by_bytes``, solved once per checkpoint (``u >= L * (s + u)`` is
        ``u >= L * s / (1 - L)``), so the hot path compares two integers."""
        loss = math.ceil(self.max_loss * saved / (1 - self.max_loss))
        return min(self.max_bytes, max(self.min_bytes, loss))

    def deadline(self, dirty_since: float) -> float:
        """When a change first made at ``dirty_since`` must have been written."""
        return dirty_since + self.interval

    def batch_deadline(self, dirty_since: float) -> float:
        """From when it may join a batch (up to ``coalesce`` of the interval early)."""
        return dirty_since + self.interval * (1 - self.coalesce)


class CheckpointTrack:
    """One answer's checkpoint state; mutated by its listener (``changed``) and the writer."""

    __slots__ = (
        "closed",
        "dirty_since",
        "key",
        "serialize",
        "sink",
        "threshold",
        "total",
        "unsaved",
        "urgent",
    )

    def __init__(
        self, key: str, sink: CheckpointSink, serialize: Callable[[], str], threshold: int
    ) -> None:
        self.key = key
        self.sink = sink
        self.serialize = serialize
        """Returns the message's parts as JSON text, as they are now."""
        self.unsaved = 0
        self.total = 0
        self.threshold = threshold
        """Unsaved bytes that make the next checkpoint due at once (``CheckpointPolicy``)."""
        self.dirty_since: float | None = None
        self.urgent = False
        self.closed = False


class Checkpointer(TaskOwner):
    """Writes due checkpoints from one owned task (``async with Checkpointer(policy):``)."""

    def __init__(
        self, policy: CheckpointPolicy, *, clock: Callable[[], float] = anyio.current_time
    ) -> None:
        self.policy = policy
        self._clock = clock
        self._timed: deque[tuple[float, CheckpointTrack]] = deque()
        self._urgent: deque[CheckpointTrack] = deque()
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()
        self._dirty = 0
        self._writing = False
        self.rows_written = 0
        """Rows a checkpoint changed (a row that already settled is not counted)."""
        self.batches_written = 0
        self.batches_failed = 0

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        group.start_soon(self._run, name="checkpointer")

    # --- the listener side (synchronous, called on the producer's task) --------------------

    def track(
        self, key: str, sink: CheckpointSink, serialize: Callable[[], str]
    ) -> CheckpointTrack:
        """Start tracking one answer's row."""
        return CheckpointTrack(key, sink, serialize, self.policy.threshold(0))

    def changed(self, track: CheckpointTrack, nbytes: int) -> None:
        """``nbytes`` of stream changed the message; schedule its checkpoint. Never blocks."""
        track.unsaved += nbytes
        track.total += nbytes
        if track.closed:
            return
        if track.dirty_since is None:
            now = self._clock()
            track.dirty_since = now
            if self._idle.is_set():
                self._idle = anyio.Event()
            self._dirty += 1
            if not self._timed:
                self._wake.set()
            self._timed.append((now, track))
        if track.unsaved >= track.threshold and not track.urgent:
            track.urgent = True
            self._urgent.append(track)
            self._wake.set()

    def close(self, track: CheckpointTrack) -> None:
        """The answer reached its terminal: no more checkpoints for it."""
        if not track.closed:
            track.closed = True
            self._clean(track)

    async def wait_idle(self) -> None:
        """Wait until every change seen so far is written (or its track closed)."""
        await self._idle.wait()

    # --- the writer ---------------------------------------------------------------------------

    def mark_serialized(self, track: CheckpointTrack) -> None:
        """The writer's step after serializing ``track``: its bytes count as saved."""
        track.unsaved = 0
        track.threshold = self.policy.threshold(track.total)
        self._clean(track)

    def _clean(self, track: CheckpointTrack) -> None:
        if track.dirty_since is not None:
            track.dirty_since = None
            self._dirty -= 1
            if self._dirty == 0 and not self._writing:
                self._idle.set()

    def take_due(self, now: float) -> list[CheckpointTrack]:
        """The writer's step: the tracks due at ``now`` (urgent first), at most ``max_batch``;
        they leave the queues (a track that changes again is queued again)."""
        due: list[CheckpointTrack] = []
        taken: set[int] = set()
        limit = self.policy.max_batch
        while self._urgent and len(due) < limit:
            track = self._urgent.popleft()
            track.urgent = False
            if track.dirty_since is not None and not track.closed and id(track) not in taken:
                taken.add(id(track))
                due.append(track)
        while self._timed and len(due) < limit:
            since, track = self._timed[0]
            if track.dirty_since != since or track.closed:
                self._timed.popleft()  # written since (or closed): a stale entry
                continue
            if self.policy.batch_deadline(since) > now:
                break
            self._timed.popleft()
            if id(track) not in taken:
                taken.add(id(track))
                due.append(track)
        return due

    async def _run(self) -> None:
        while True:
            self._wake = anyio.Event()
            due = self.take_due(self._clock())
            if due:
                await self._write(due)
                continue
            wait = math.inf
            if self._timed:
                wait = max(0.0, self.policy.batch_deadline(self._timed[0][0]) - self._clock())
            with anyio.move_on_after(wait):
                await self._wake.wait()

    async def _write(self, due: list[CheckpointTrack]) -> None:
        self._writing = True
        try:
            await self._write_batches(due)
        finally:
            self._writing = False
            if self._dirty == 0:
                self._idle.set()

    async def _write_batches(self, due: list[CheckpointTrack]) -> None:
        batches: dict[int, tuple[CheckpointSink, list[tuple[str, str]], list[CheckpointTrack]]] = {}
        for track in due:
            try:
                parts = track.serialize()
            except Exception:  # isolation boundary: one unserializable message
                log.exception("could not serialize the checkpoint of %r", track.key)
                self._clean(track)
                continue
            sink, items, tracks = batches.setdefault(id(track.sink), (track.sink, [], []))
            items.append((track.key, parts))
            tracks.append(track)
            self.mark_serialized(track)
        for sink, items, tracks in batches.values():
            try:
                with anyio.fail_after(self.policy.write_timeout):
                    self.rows_written += await sink.write_checkpoints(items)
                self.batches_written += 1
            except Exception:  # isolation boundary: a failed checkpoint is retried later
                self.batches_failed += 1
                log.warning("a checkpoint batch of %d row(s) failed", len(items), exc_info=True)
                for track in tracks:
                    self.changed(track, 0)
