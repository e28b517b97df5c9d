"""``AgentRunner``: the in-process agent's entry point, cheap to import.

The runner holds what every turn shares (the model resolver and the injectable ``sleep``,
``clock``, ``now``, ``new_id``, ``settle_limit``); ``stream(request)`` returns the turn's chunk
generator, ``drupe.agent.loop.run_turn`` (whose docstring is the loop's contract).

Contract: importing this module imports neither the loop nor pydantic-ai (about a second of
CPU): the composition root builds a runner at boot, and the loop is imported by the first
``stream`` call, so a server answers ``/healthz`` before any model code is loaded. A second
``stream`` call costs a ``sys.modules`` lookup.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio

from drupe.errors import DrupeError

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from drupe.agent.request import TurnRequest
    from drupe.chunks.types import Chunk

__all__ = ["AgentRunner", "LimitCode", "LoopLimitError"]

LimitCode = Literal["tool_call_limit_reached", "step_limit_reached"]


class LoopLimitError(DrupeError):
    """The turn reached a cap with tools still asking for more; never reported as success."""

    def __init__(self, code: LimitCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code: LimitCode = code


class AgentRunner:
    """Runs turns of the in-process agent; one runner serves any number of concurrent turns.

    ``sleep``, ``clock`` (monotonic seconds, for tool durations), ``now`` (for HTTP-date
    ``Retry-After``) and ``new_id`` (text/reasoning part ids, approval ids) are injectable so
    tests never wait and can pin values. ``settle_limit`` bounds ``on_abort`` / ``on_error``.
    """

    def __init__(
        self,
        resolve_model: Callable[[str], Model],
        *,
        sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex[:16],
        settle_limit: float = 5.0,
    ) -> None:
        self.resolve_model = resolve_model
        self.sleep = sleep
        self.clock = clock
        self.now = now
        self.new_id = new_id
        self.settle_limit = settle_limit

    def stream(self, request: TurnRequest) -> AsyncGenerator[Chunk, None]:
        """Answer ``request``: the async generator of its UI chunks (``loop.run_turn``); it
        raises on error and propagates cancellation. Nothing runs until it is iterated."""
        from drupe.agent.loop import run_turn  # pydantic-ai: imported by the first turn

        return run_turn(self, request)
