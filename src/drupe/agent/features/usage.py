"""The usage observer: after every step, one ``message-metadata`` chunk with the cumulative usage.

Contract: usage is summed from each step's own ``RequestUsage`` (never a provider "total", which
some providers omit). The chunk carries the FULL cumulative snapshot, because the AI SDK
deep-merges message metadata: keys can be overwritten but never cleared, so a per-step delta
would be wrong. Shape::

    {"usage": {"inputTokens", "outputTokens", "totalTokens",
               "reasoningTokens"?, "cachedInputTokens"?}, "modelId": "<provider:model>"}

The optional counters appear once any step reported them. The observer never raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai.usage import RequestUsage

from drupe.agent.hooks import Hooks, StepResult, TurnContext

__all__ = ["UsageObserver", "UsageTotals"]


@dataclass(slots=True)
class UsageTotals:
    """Running sums of the usage counters of a turn's steps."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0

    def add(self, usage: RequestUsage) -> None:
        """Add one step's usage."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.reasoning_tokens += usage.output_reasoning_tokens
        self.cached_input_tokens += usage.cache_read_tokens

    def snapshot(self) -> dict[str, int]:
        """Return the UI ``usage`` object (camelCase; optional counters only when non-zero)."""
        snap = {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.input_tokens + self.output_tokens,
        }
        if self.reasoning_tokens:
            snap["reasoningTokens"] = self.reasoning_tokens
        if self.cached_input_tokens:
            snap["cachedInputTokens"] = self.cached_input_tokens
        return snap


class UsageObserver(Hooks):
    """Internal observer: accumulates usage per step and writes the cumulative metadata chunk."""

    def __init__(self) -> None:
        self.totals = UsageTotals()

    async def on_step_finish(self, ctx: TurnContext, step: StepResult) -> None:
        self.totals.add(step.usage)
        metadata: dict[str, Any] = {"usage": self.totals.snapshot(), "modelId": ctx.model_id}
        ctx.write({"type": "message-metadata", "messageMetadata": metadata})
