"""``UsageMeter``: gateway usage counted in memory and written behind, in batches.

Contract:

* ``TokenUsage(input_tokens, output_tokens)`` is what one gateway answer used, as its model
  (or the pass-through's upstream) reported it; a response's ``on_end`` callback gets it once.
* ``record(delta)`` is synchronous and never blocks or raises: it merges the delta into the
  pending batch (one entry per ``(day, key, user, model, dialect)`` group) and, unless a write
  is under way, starts one. The writer takes the whole batch and hands it to
  ``GatewayUsageStore.add``; what is recorded meanwhile goes into the next batch. Idle, a
  request is written at once; under load one write carries many requests.
* A failed write is logged and its deltas go back into the batch (written with the next one).
  At most ``MAX_PENDING_GROUPS`` groups wait; a new group past that is dropped and counted in
  ``dropped`` (a database that stays down cannot grow the process without bound).
* ``flush()`` waits until everything recorded before it is written (or its write failed); the
  usage routes call it before reading, and ``aclose()`` (flush, then refuse new records) runs
  when the runtime closes, before the database does.

In a cluster each node meters its own requests; the store's upserts add, so nothing is lost.

* ``unwritten_tokens(key_id, day)``: the tokens recorded for a key and UTC day that are not yet
  in the store (pending or being written). With the store's ``tokens_on`` read AFTER it, the
  sum never undercounts the key's day (a write landing in between is counted twice, briefly):
  the gateway's day budgets are checked against it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final, NamedTuple

from drupe.persistence.gateway_usage import GatewayUsageStore, UsageDelta

__all__ = ["MAX_PENDING_GROUPS", "TokenUsage", "UsageMeter"]

log = logging.getLogger(__name__)

MAX_PENDING_GROUPS: Final = 10_000


class TokenUsage(NamedTuple):
    """The tokens one gateway answer used."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


class UsageMeter:
    """Write-behind batches of gateway usage over one ``GatewayUsageStore``."""

    def __init__(self, store: GatewayUsageStore) -> None:
        self.store = store
        self.dropped = 0
        """Deltas refused because too many groups were waiting."""
        self.failed_writes = 0
        self._pending: dict[tuple[object, ...], UsageDelta] = {}
        self._in_flight: list[UsageDelta] = []
        self._writer: asyncio.Task[None] | None = None
        self._closed = False

    def record(self, delta: UsageDelta) -> None:
        """Count one request's usage (written behind; see the module docstring)."""
        if self._closed:
            log.debug("gateway usage recorded after close, not stored: %s", delta)
            return
        self._merge([delta])
        self._start_writer()

    def unwritten_tokens(self, key_id: str, day: object) -> int:
        """Tokens of ``key_id`` on ``day`` recorded here and not yet in the store."""
        return sum(
            d.input_tokens + d.output_tokens
            for d in (*self._pending.values(), *self._in_flight)
            if d.key_id == key_id and d.day == day
        )

    async def flush(self) -> None:
        """Wait until what was recorded so far is written (a failed write is not retried
        more than once here)."""
        retried = False
        while True:
            writer = self._writer
            if writer is not None and not writer.done():
                await asyncio.shield(writer)
                continue
            if not self._pending or retried:
                return
            retried = True
            self._start_writer()

    async def aclose(self) -> None:
        await self.flush()
        self._closed = True

    # --- internals ----------------------------------------------------------------------------

    def _merge(self, deltas: list[UsageDelta]) -> None:
        for delta in deltas:
            seen = self._pending.get(delta.group)
            if seen is not None:
                self._pending[delta.group] = seen.plus(delta)
            elif len(self._pending) < MAX_PENDING_GROUPS:
                self._pending[delta.group] = delta
            else:
                self.dropped += 1
                log.warning("gateway usage not stored: %d groups already wait", len(self._pending))

    def _start_writer(self) -> None:
        if self._writer is not None and not self._writer.done():
            return  # the running writer takes this batch next
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: flush() writes it
            return
        self._writer = loop.create_task(self._write(), name="gateway-usage-writer")

    async def _write(self) -> None:
        while self._pending:
            batch, self._pending = list(self._pending.values()), {}
            self._in_flight = batch
            try:
                await self.store.add(batch)
            except asyncio.CancelledError:
                self._merge(batch)  # flush() or the next record writes it
                raise
            except Exception:
                self.failed_writes += 1
                log.warning(
                    "could not store gateway usage (kept for the next write)", exc_info=True
                )
                self._merge(batch)
                return
            finally:
                self._in_flight = []
