"""Step retry policy: which model failures are retried, and how long to wait before the next try.

Contract:
- ``RetryPolicy`` lives in ``retry_policy`` (re-exported here): a turn request carries one, and
  building a request must not import pydantic-ai, which this module does.
- Pure and synchronous. The loop asks ``classify(error)`` and ``delay_for(...)``; it sleeps with an
  injected ``sleep`` and emits the transient ``data-retry`` chunk built by ``retry_chunk``.
- A step is retried only before its first content chunk was emitted (the loop enforces this:
  once anything of the step reached a listener, a replay would duplicate it).
- Retryable: HTTP 408, 409, 429 and 5xx (``ModelHTTPError``), pydantic-ai's rate-limit,
  unavailable, server and connection/timeout categories, and raw transport failures
  (``ConnectionError``, ``TimeoutError``, httpx transport errors). Everything else (400, 401,
  403, 404, 422, quota exhausted, a bug) is not retried.
- ``Retry-After`` wins over the exponential backoff when the provider sends it (seconds or an
  HTTP date; ``retry-after-ms`` too). A wait longer than ``max_retry_after`` is not honoured by
  sleeping: the failure is final (a turn never silently stalls for minutes).
- Never sleeps, never raises on malformed headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelServerError,
    ModelUnavailableError,
)

from drupe.agent.retry_policy import RETRYABLE_STATUS, RetryPolicy, parse_retry_after
from drupe.chunks.types import Chunk

__all__ = [
    "RETRYABLE_STATUS",
    "FailureInfo",
    "RetryPolicy",
    "classify",
    "parse_retry_after",
    "retry_chunk",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureInfo:
    """What the loop needs to know about one failed model request."""

    retryable: bool
    status_code: int | None
    retry_after: float | None
    message: str


def classify(error: BaseException, *, now: datetime | None = None) -> FailureInfo:
    """Describe ``error``: whether a retry may help, its HTTP status and requested wait."""
    status = _status_code(error)
    retry_after = _retry_after(error, now=now)
    retryable = _is_retryable(error, status)
    return FailureInfo(
        retryable=retryable, status_code=status, retry_after=retry_after, message=_message(error)
    )


def retry_chunk(
    *, next_attempt: int, policy: RetryPolicy, delay: float, info: FailureInfo
) -> Chunk:
    """Return the transient ``data-retry`` chunk announcing try ``next_attempt``."""
    return {
        "type": "data-retry",
        "data": {
            "attempt": next_attempt,
            "maxAttempts": policy.attempts,
            "delayMs": round(delay * 1000),
            "statusCode": info.status_code,
            "message": info.message,
        },
        "transient": True,
    }


# --- internals ---------------------------------------------------------------------------------


def _status_code(error: BaseException) -> int | None:
    if isinstance(error, ModelHTTPError):
        return error.status_code
    for candidate in (error, error.__cause__):
        status = getattr(candidate, "status_code", None)
        if isinstance(status, int):
            return status
        response = getattr(candidate, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            return status
    return None


def _headers_of(error: BaseException) -> Mapping[str, str] | None:
    if isinstance(error, ModelHTTPError) and error.headers is not None:
        return error.headers
    for candidate in (error, error.__cause__):
        response = getattr(candidate, "response", None)
        headers = getattr(response, "headers", None)
        if headers is not None:
            try:
                return {str(key): str(value) for key, value in dict(headers).items()}
            except (TypeError, ValueError):
                return None
    return None


def _retry_after(error: BaseException, *, now: datetime | None) -> float | None:
    headers = _headers_of(error)
    if headers is not None:
        parsed = parse_retry_after(headers, now=now)
        if parsed is not None:
            return parsed
    if isinstance(error, ModelAPIError) and error.retry_after is not None:
        return error.retry_after
    return None


def _is_retryable(error: BaseException, status: int | None) -> bool:
    if isinstance(error, ModelQuotaExceededError):
        return False
    if isinstance(
        error, ModelRateLimitError | ModelUnavailableError | ModelServerError | ModelConnectionError
    ):
        return True
    if status is not None:
        return status in RETRYABLE_STATUS or 500 <= status <= 599
    if isinstance(error, ModelAPIError):
        cause = error.__cause__
        return cause is not None and _is_transport_error(cause)
    return _is_transport_error(error)


def _is_transport_error(error: BaseException) -> bool:
    if isinstance(error, ConnectionError | TimeoutError):
        return True
    module = type(error).__module__
    transport_modules = ("httpx", "httpx2", "httpcore", "openai", "anthropic")
    if module.split(".")[0] in transport_modules:
        name = type(error).__name__
        return any(word in name for word in ("Timeout", "Connect", "Network", "RemoteProtocol"))
    return False


def _message(error: BaseException) -> str:
    text = str(error).strip()
    return text if text else type(error).__name__
