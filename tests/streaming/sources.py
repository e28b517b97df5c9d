"""Chunk sources for stream-manager tests: the runner seam, driven step by step.

These stand in for a model at the ``ExecutionSpec.source`` seam (the manager's only contact
with a model), so each scenario controls exactly when chunks arrive, when the source fails,
and when it hangs, without timing assumptions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio

Chunk = dict[str, Any]


def text_chunks(message_id: str, words: Sequence[str], *, part: str = "t1") -> list[Chunk]:
    """A complete one-step text answer."""
    return [
        {"type": "start", "messageId": message_id},
        {"type": "start-step"},
        {"type": "text-start", "id": part},
        *({"type": "text-delta", "id": part, "delta": w} for w in words),
        {"type": "text-end", "id": part},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


class Source:
    """An async chunk source with gates: ``hold_at`` pauses before that index until released."""

    def __init__(
        self,
        chunks: Sequence[Chunk],
        *,
        hold_at: int | None = None,
        fail_at: int | None = None,
        error: BaseException | None = None,
        hang_at: int | None = None,
    ) -> None:
        self.chunks = list(chunks)
        self.hold_at = hold_at
        self.fail_at = fail_at
        self.error = error or RuntimeError("source failed")
        self.hang_at = hang_at
        self.released = anyio.Event()
        self.reached = anyio.Event()
        self.closed = anyio.Event()
        self.emitted = 0

    def __call__(self) -> AsyncIterator[Chunk]:
        return self._run()

    async def _run(self) -> AsyncIterator[Chunk]:
        try:
            for index, chunk in enumerate(self.chunks):
                if index == self.fail_at:
                    raise self.error
                if index == self.hold_at:
                    self.reached.set()
                    await self.released.wait()
                if index == self.hang_at:
                    self.reached.set()
                    await anyio.sleep_forever()
                self.emitted += 1
                yield chunk
                await anyio.lowlevel.checkpoint()
            if self.fail_at is not None and self.fail_at >= len(self.chunks):
                raise self.error
        finally:
            self.closed.set()


def factory(source: Source) -> Callable[[], AsyncIterator[Chunk]]:
    return source
