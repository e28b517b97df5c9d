"""The gateway's refusals before any route runs, in each dialect's own error shape.

Contract: a path is the OpenAI dialect's when it starts with ``/v1/`` (or is ``/v1``), and the
Anthropic dialect's when it is a Messages path (``/v1/messages...`` or the provider-pinned
``/{provider}/v1/messages...``). The request guards (a body past the limit: 413) and the
unknown-route fallback (404, 405) answer such a path with ``openai_error_body`` or
``anthropic_error_body``, never FastAPI's ``{"detail"}``, so an official client reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from drupe.gateway.anthropic_compat import anthropic_error_body
from drupe.gateway.openai_compat import openai_error_body
from drupe.gateway.prompt import ErrorKind, GatewayFailure

__all__ = ["dialect_of", "dialect_refusal", "is_gateway_path"]

Dialect = Literal["openai", "anthropic"]
_KINDS: Final[Mapping[int, ErrorKind]] = {
    404: "not_found",
    405: "invalid_request",
    413: "too_large",
}


def dialect_of(path: str) -> Dialect | None:
    """The dialect a path belongs to (None: not a gateway path)."""
    head, sep, tail = path.partition("/v1/messages")
    if sep and (head == "" or head.count("/") == 1) and (tail == "" or tail.startswith("/")):
        return "anthropic"
    if path == "/v1" or path.startswith("/v1/"):
        return "openai"
    return None


def is_gateway_path(path: str) -> bool:
    return dialect_of(path) is not None


def dialect_refusal(path: str) -> Callable[[int, str], dict[str, Any]] | None:
    """``(status, message) -> body`` in the path's dialect (None: not a gateway path)."""
    dialect = dialect_of(path)
    if dialect is None:
        return None
    render = anthropic_error_body if dialect == "anthropic" else openai_error_body

    def body(status: int, message: str) -> dict[str, Any]:
        return render(GatewayFailure(status, _KINDS.get(status, "invalid_request"), message))

    return body
