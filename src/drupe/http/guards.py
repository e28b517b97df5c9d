"""ASGI guards in front of every route: the request body cap and the browser ``Origin`` check.

* ``BodyLimit``: a body larger than ``Limits.max_body_bytes`` (``max_gateway_body_bytes`` on the
  LLM gateway's dialect paths) is refused with 413 before any route runs (by ``Content-Length``
  when given, else while reading). The body is read here, in full, and handed on unchanged; later
  ``receive`` calls go to the server (disconnects).
* ``OriginCheck``: on browser routes (``/api/``) a request whose ``Origin`` is present and is
  neither the server's own origin (scheme + ``Host``) nor in ``Settings.allowed_origins`` is
  refused with 403. Requests without ``Origin`` (curl, the CLI, server-to-server) pass: the
  check is against cross-site pages driving a user's browser, not an authentication.

Both answer ``{"detail": "..."}`` like every other error (the wording lives in ``errors``),
except under a path prefix given a body of its own (``BodyLimit(refusals=...)``: the protocol
routes answer in their protocol's error shape, a JSON-RPC error or an AG-UI ``RUN_ERROR``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit", "OriginCheck", "is_same_origin"]


RefusalBody = Callable[[int, str], Mapping[str, Any]]
"""``(status, message)`` -> the JSON body of a refusal under one path prefix."""


async def _reject(send: Send, status: int, detail: str, shape: RefusalBody | None = None) -> None:
    body = orjson.dumps(shape(status, detail) if shape is not None else {"detail": detail})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        refusals: Iterable[tuple[str, RefusalBody]] = (),
        wider: Callable[[str], bool] | None = None,
        wider_max_bytes: int | None = None,
        shape_of: Callable[[str], RefusalBody | None] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.refusals = tuple(refusals)
        self.wider = wider
        """Paths with a limit of their own (``wider_max_bytes``: the LLM gateway's dialects)."""
        self.wider_max_bytes = wider_max_bytes
        self.shape_of = shape_of

    def _shape(self, scope: Scope) -> RefusalBody | None:
        path = scope.get("path", "")
        shape = next((s for prefix, s in self.refusals if path.startswith(prefix)), None)
        if shape is None and self.shape_of is not None:
            shape = self.shape_of(path)
        return shape

    def _limit(self, scope: Scope) -> int:
        wider, limit = self.wider, self.wider_max_bytes
        if wider is not None and limit is not None and wider(scope.get("path", "")):
            return limit
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope)
        too_large = f"request body is larger than the {limit}-byte limit"
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _reject(send, 413, too_large, self._shape(scope))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _reject(send, 413, too_large, self._shape(scope))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def is_same_origin(origin: str, scope: Scope) -> bool:
    host = _header(scope, b"host")
    if host is None:
        return False
    scheme = scope.get("scheme", "http")
    return origin.rstrip("/").lower() == f"{scheme}://{host}".lower()


class OriginCheck:
    """Refuse cross-origin browser requests on ``/api/`` with 403."""

    def __init__(self, app: ASGIApp, *, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(o.rstrip("/").lower() for o in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            origin = _header(scope, b"origin")
            if (
                origin is not None
                and not is_same_origin(origin, scope)
                and origin.rstrip("/").lower() not in self.allowed
            ):
                await _reject(
                    send,
                    403,
                    f"cross-origin request from {origin!r} refused; add it to allowed_origins "
                    "(DRUPE_ALLOWED_ORIGINS) to allow it",
                )
                return
        await self.app(scope, receive, send)
