"""Token usage of Claude Code turns, in the UI's shape (pure).

Owns the conversion of Anthropic usage objects (``input_tokens``, ``cache_read_input_tokens``,
``cache_creation_input_tokens``, ``output_tokens``) to the AI SDK ``usage`` object the agent loop
writes (``inputTokens``, ``outputTokens``, ``totalTokens``, ``cachedInputTokens``?,
``reasoningTokens``?), the arithmetic the steer roll needs (A2's share = the turn minus what A1a
got), and the ``message-metadata`` payload.

Must never: mutate its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["add_usage", "minus_usage", "ui_usage", "usage_metadata"]


def ui_usage(raw: Mapping[str, Any] | None) -> dict[str, int]:
    """An Anthropic usage object as the UI's ``usage`` (camelCase; prompt includes the cache)."""
    raw = raw or {}
    cache_read = int(raw.get("cache_read_input_tokens") or 0)
    cache_write = int(raw.get("cache_creation_input_tokens") or 0)
    prompt = int(raw.get("input_tokens") or 0) + cache_read + cache_write
    output_tokens = int(raw.get("output_tokens") or 0)
    usage = {"inputTokens": prompt, "outputTokens": output_tokens}
    usage["totalTokens"] = prompt + output_tokens
    if cache_read:
        usage["cachedInputTokens"] = cache_read
    reasoning = int((raw.get("output_tokens_details") or {}).get("thinking_tokens") or 0)
    if reasoning:
        usage["reasoningTokens"] = reasoning
    return usage


def add_usage(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Counter-wise sum (keys in first-seen order, so the JSON is stable)."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in dict.fromkeys([*a, *b])}


def minus_usage(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``a - b`` per counter, never below zero; optional counters that reach zero are dropped."""
    out = {k: max(0, v - b.get(k, 0)) for k, v in a.items()}
    return {
        k: v for k, v in out.items() if v or k in ("inputTokens", "outputTokens", "totalTokens")
    }


def usage_metadata(
    usage: Mapping[str, int], model_id: str | None, cost_usd: float | None = None
) -> dict[str, Any]:
    """A ``message-metadata`` payload carrying ``usage`` (the shape of the agent loop's)."""
    metadata: dict[str, Any] = {"usage": dict(usage)}
    if model_id:
        metadata["modelId"] = model_id
    if cost_usd is not None:
        metadata["providerCostUsd"] = cost_usd
    return metadata
