"""The pass-through's wire: where a model id is forwarded, what the upstream gets, what it said.

Contract (pure functions over bytes and JSON; no I/O):

* ``Upstream``: the base URL, provider model name, key, flavor and proxy of one model id;
  ``env_proxy`` is the ``HTTP(S)_PROXY`` the environment names for a URL (``NO_PROXY`` honoured).
* ``upstream_body``: the client's body with ``model`` set to the provider's name,
  ``stream_options.include_usage`` forced on when streaming, and for ``openai-compatible``
  servers ``max_completion_tokens`` -> ``max_tokens`` and ``developer`` -> ``system``.
* ``tokens_of``: an OpenAI ``usage`` object's input/output split (a bare ``total_tokens``
  counts as input; anything not a non-negative int counts 0).
* ``meaningful``: whether a frame commits the response (content, reasoning, tool calls or a
  finish reason).
* ``upstream_failure``: an upstream HTTP error as the client sees it (429 -> 429;
  400/413/422 -> 400; anything else -> 502), with the upstream's message when it gave one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from drupe.gateway.prompt import GatewayFailure
from drupe.persistence.gateway_usage_meter import TokenUsage

__all__ = [
    "Upstream",
    "env_proxy",
    "meaningful",
    "tokens_of",
    "upstream_body",
    "upstream_failure",
]


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where one ``provider:model`` id is forwarded."""

    base_url: str
    model_name: str
    api_key: str = field(repr=False)
    compatible: bool
    """An ``openai-compatible`` server (llama.cpp, Ollama, vLLM): see the body rewrites."""
    proxy: str | None = None
    """``HTTP(S)_PROXY`` for the URL unless ``NO_PROXY`` exempts it, read once (as httpx does)."""


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (None: direct)."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    if parts.hostname is None or proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


def upstream_body(body: Mapping[str, Any], upstream: Upstream, *, stream: bool) -> bytes:
    """The JSON the upstream gets (see the module docstring for what is rewritten)."""
    out = dict(body)
    out["model"] = upstream.model_name
    if stream:
        options = body.get("stream_options")
        out["stream_options"] = {**(options if isinstance(options, dict) else {})}
        out["stream_options"]["include_usage"] = True
    if upstream.compatible:
        if "max_completion_tokens" in out:
            limit = out.pop("max_completion_tokens")
            out["max_tokens"] = limit if limit is not None else out.get("max_tokens")
        messages = out.get("messages")
        if isinstance(messages, list) and any(
            isinstance(m, dict) and m.get("role") == "developer" for m in messages
        ):
            out["messages"] = [
                {**m, "role": "system"}
                if isinstance(m, dict) and m.get("role") == "developer"
                else m
                for m in messages
            ]
    return orjson.dumps(out)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def tokens_of(usage: Any) -> TokenUsage:
    """An OpenAI ``usage`` object's split (a bare ``total_tokens`` counts as input)."""
    if not isinstance(usage, dict):
        return TokenUsage()
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is None and completion is None:
        return TokenUsage(_count(usage.get("total_tokens")) or 0, 0)
    return TokenUsage(prompt or 0, completion or 0)


def meaningful(frame: Mapping[str, Any]) -> bool:
    """A frame that commits the response: content, reasoning, tool calls or a finish reason."""
    choices = frame.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason"):
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and (
            delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls")
        ):
            return True
    return False


def upstream_failure(status: int, raw: bytes) -> GatewayFailure:
    """How an upstream HTTP error is reported to the client (as the agent-loop path does)."""
    message = ""
    try:
        payload = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message = error["message"]
    elif isinstance(error, str):
        message = error
    text = f"the upstream answered HTTP {status}" + (f": {message}" if message else "")
    if status == 429:
        return GatewayFailure(429, "rate_limit", text)
    if status in (400, 413, 422):
        return GatewayFailure(400, "invalid_request", text)
    return GatewayFailure(502, "upstream", text)
