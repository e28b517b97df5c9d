"""The built web UI (``gateway/static``), served for every path no route claimed.

Installed as the router's ``default`` handler, so it never shadows a route whatever the order
routers are included in (the OpenAI/Anthropic router may arrive in the lifespan). Rules:

* ``/assets/*`` are content-hashed by Vite: ``Cache-Control: public, max-age=31536000,
  immutable``; so is ``/<client route>/assets/*``, which a relative ``./assets/`` URL in
  ``index.html`` resolves to on a deep client route;
* any other existing file is served as is; ``index.html`` with ``no-cache``;
* an unknown path under ``/v1`` (or a provider-pinned Messages path) is a 404 in the dialect's
  own error shape (``drupe.gateway.refusals``); under ``/api/`` or with a file extension a
  JSON 404; any other
  GET is a client-side route and gets ``index.html`` (SPA fallback).
"""

from __future__ import annotations

from pathlib import Path

import orjson
from starlette.responses import FileResponse, Response
from starlette.types import Receive, Scope, Send

from drupe.gateway.refusals import dialect_refusal

__all__ = ["STATIC_DIR", "StaticUI"]

STATIC_DIR = Path(__file__).parent / "static"
_API_PREFIXES = ("/api/", "/v1/")
_IMMUTABLE = "public, max-age=31536000, immutable"


def _not_found(detail: str, status: int = 404) -> Response:
    return Response(
        orjson.dumps({"detail": detail}), status_code=status, media_type="application/json"
    )


class StaticUI:
    """ASGI app serving the UI files with an ``index.html`` fallback."""

    def __init__(self, directory: Path = STATIC_DIR) -> None:
        self.directory = directory.resolve()

    def _resolve(self, path: str) -> Path | None:
        if "/assets/" in path:
            path = "/assets/" + path.rsplit("/assets/", 1)[1]
        relative = path.lstrip("/")
        if not relative:
            return None
        candidate = (self.directory / relative).resolve()
        if not candidate.is_relative_to(self.directory) or not candidate.is_file():
            return None
        return candidate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        response: Response
        dialect = dialect_refusal(path)
        if dialect is not None:  # an LLM client reads its own dialect's error shape
            message = f"no route {scope['method']} {path}"
            response = Response(
                orjson.dumps(dialect(404, message)), status_code=404, media_type="application/json"
            )
        elif path.startswith(_API_PREFIXES) or path == "/api":
            response = _not_found(f"no route {scope['method']} {path}")
        elif scope["method"] not in ("GET", "HEAD"):
            response = _not_found(f"method {scope['method']} is not allowed on {path}", 405)
        elif (file := self._resolve(path)) is not None:
            cache = _IMMUTABLE if "/assets/" in path else "no-cache"
            response = FileResponse(file, headers={"cache-control": cache})
        elif "." in path.rsplit("/", 1)[-1]:
            response = _not_found(f"no file {path}")
        else:
            index = self.directory / "index.html"
            if not index.is_file():
                response = _not_found("the web UI is not built (run scripts/build-web)")
            else:
                response = FileResponse(index, headers={"cache-control": "no-cache"})
        await response(scope, receive, send)
