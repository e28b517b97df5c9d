"""steer_yield: stop a chat turn cleanly at the next step boundary when a steer is waiting.

Contract (reference §5 "Yield"):
- Evaluated after each completed step, never while an approval is pending (the loop does not
  ask then), and never for agent sessions (the caller simply gives no ``steer_pending``).
- It is *tracked*: ``decide`` reports whether the yield fired, and when the tool-call or step
  cap fires on the same step the clean yield wins, so no cap error is raised.
- A yielded turn ends with a normal ``finish`` (``finishReason: "stop"``) and is persisted
  ``success``; the stream manager then chains the steer continuation.
- A throwing ``steer_pending`` counts as "no steer" (logged): a broken probe must not end turns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["StepBoundary", "SteerYield", "decide_boundary"]

logger = logging.getLogger(__name__)

StepBoundary = Literal["continue", "yield", "tool_call_limit_reached", "step_limit_reached"]


@dataclass(frozen=True, slots=True)
class SteerYield:
    """The stop condition contributed by the feature."""

    steer_pending: Callable[[], bool] | None

    def fired(self) -> bool:
        """Return whether a steer is waiting now."""
        if self.steer_pending is None:
            return False
        try:
            return bool(self.steer_pending())
        except Exception:  # isolation boundary: a broken probe is "no steer"
            logger.exception("steer_pending raised; treated as no pending steer")
            return False


def decide_boundary(
    *,
    steer: bool,
    tool_calls: int,
    max_tool_calls: int,
    steps: int,
    max_steps: int,
) -> StepBoundary:
    """Decide what happens after a step that called tools (pure).

    The steer yield wins over both caps; otherwise reaching a cap is an error.
    """
    if steer:
        return "yield"
    if tool_calls >= max_tool_calls:
        return "tool_call_limit_reached"
    if steps >= max_steps:
        return "step_limit_reached"
    return "continue"
