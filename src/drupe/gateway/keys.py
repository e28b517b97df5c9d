"""Bearer API-key authentication of the ``/v1/*`` gateway routes.

Owns ``key_dependency(runtime, error_body, ...)``: a FastAPI dependency that reads the key from
``Authorization: Bearer <key>`` (and, for the Anthropic dialect, ``x-api-key``), checks it
against the hashed keys of ``runtime.db.api_keys`` and raises ``GatewayError`` (401, in the
dialect's error shape) when it is missing or not a live key. With
``settings.require_gateway_keys`` false every request passes.

A verified key is remembered by its SHA-256 for ``_CACHE_SECONDS`` so a busy client does not
pay one database write per request (``last_used_at`` is stamped on the misses only); a revoked
key therefore stops working within that time. Refusals are never cached.

Never: log, store or echo a key, or put it in an error message.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from starlette.requests import Request

from drupe.gateway.prompt import GatewayError, GatewayFailure
from drupe.persistence.api_keys import hash_key
from drupe.persistence.records import ApiKeyRecord

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["KeyCache", "key_dependency", "presented_key"]

_CACHE_SECONDS: Final = 10.0
_CACHE_MAX: Final = 4096


def presented_key(request: Request, *, allow_x_api_key: bool) -> str | None:
    """The key the client presented, or None (never validated here)."""
    header = request.headers.get("authorization")
    if header:
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    if allow_x_api_key:
        value = request.headers.get("x-api-key", "").strip()
        if value:
            return value
    return None


class KeyCache:
    """Recently verified keys, by hash, with an absolute expiry."""

    def __init__(self, ttl: float = _CACHE_SECONDS, max_entries: int = _CACHE_MAX) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: dict[str, tuple[float, ApiKeyRecord]] = {}

    def get(self, digest: str) -> ApiKeyRecord | None:
        entry = self._entries.get(digest)
        if entry is None:
            return None
        expires, record = entry
        if time.monotonic() >= expires:
            del self._entries[digest]
            return None
        return record

    def put(self, digest: str, record: ApiKeyRecord) -> None:
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[digest] = (time.monotonic() + self.ttl, record)


def key_dependency(
    runtime: Runtime,
    error_body: Callable[[GatewayFailure], dict[str, Any]],
    *,
    allow_x_api_key: bool,
    cache: KeyCache | None = None,
) -> Callable[[Request], Awaitable[ApiKeyRecord | None]]:
    """Build the dependency; it returns the key's record (None when keys are not required)."""
    verified = cache or KeyCache()

    async def require_key(request: Request) -> ApiKeyRecord | None:
        if not runtime.settings.require_gateway_keys:
            return None
        key = presented_key(request, allow_x_api_key=allow_x_api_key)
        if key is None:
            where = "Authorization: Bearer <key>" + (" or x-api-key" if allow_x_api_key else "")
            raise _unauthorized(f"missing API key: send it as {where}", error_body)
        digest = hash_key(key)
        record = verified.get(digest)
        if record is None:
            record = await runtime.db.api_keys.verify(key)
            if record is None:
                raise _unauthorized("invalid or revoked API key", error_body)
            verified.put(digest, record)
        return record

    return require_key


def _unauthorized(
    message: str, error_body: Callable[[GatewayFailure], dict[str, Any]]
) -> GatewayError:
    failure = GatewayFailure(401, "authentication", message)
    return GatewayError(failure, error_body, headers={"www-authenticate": "Bearer"})
