"""``push_or_record``: fold a chunk, or record that the accumulator rejected it (never freeze).

The accumulator raises ``AccumulateError`` where the AI SDK would throw (a delta without its
start, a tool chunk for an unknown call, ...), and then changes nothing. The server keeps going:
the rejected chunk is left out, every later chunk is still folded, and the message records the
rejections in ONE ``data-error`` part with the id ``REJECTED_PART_ID`` (updated in place on
every further rejection): ``{"name": "AccumulateError", "message": ..., "rejectedChunks": n}``.

Contract: ``push_or_record`` never raises ``AccumulateError`` and never mutates the chunk. A
terminal ``error`` replaces the part with the stream's own error (a stored message has exactly
one ``data-error`` part, see ``drupe.chunks.normalize.append_error_part``).
"""

from __future__ import annotations

from typing import Final

from drupe.chunks.accumulate import AccumulateError, Accumulator
from drupe.chunks.types import Chunk

__all__ = ["REJECTED_PART_ID", "push_or_record"]

REJECTED_PART_ID: Final = "rejected-chunks"
"""The id of the ``data-error`` part that counts rejected chunks."""


def push_or_record(accumulator: Accumulator, chunk: Chunk, rejected: int) -> int:
    """Push ``chunk``; on a rejection, record it. Returns the new count of rejected chunks."""
    try:
        accumulator.push(chunk)
    except AccumulateError as err:
        rejected += 1
        accumulator.push(
            {
                "type": "data-error",
                "id": REJECTED_PART_ID,
                "data": {
                    "name": "AccumulateError",
                    "message": (
                        f"{rejected} chunk(s) could not be added to the message"
                        f" and were left out; the last one: {err}"
                    ),
                    "rejectedChunks": rejected,
                },
            }
        )
    return rejected
