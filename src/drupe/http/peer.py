"""``ForwardedPeer``: the outermost ASGI layer of the app. It keeps the TCP peer's address
(``scope["state"]["peer"]``: what the trusted proxy header check of ``identity.gate`` looks at)
and then applies ``X-Forwarded-For`` / ``X-Forwarded-Proto`` from trusted hosts exactly as
uvicorn would (its ``ProxyHeadersMiddleware``, the hosts of ``FORWARDED_ALLOW_IPS``, default
``127.0.0.1``), so routes still see the browser's address and scheme behind a proxy.

``drupe serve`` (and the test kit's ``serve_app``) run uvicorn with ``proxy_headers=False`` so
that the peer reaches this layer unchanged. Under a server that rewrites the client itself the
peer kept here is already the forwarded address: the proxy header check then fails closed (the
header is ignored), never open.
"""

from __future__ import annotations

import os

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from drupe.identity.gate import PEER_KEY

__all__ = ["ForwardedPeer"]


class ForwardedPeer:
    def __init__(self, app: ASGIApp) -> None:
        trusted = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
        self.app = app
        self._forwarded = ProxyHeadersMiddleware(app, trusted_hosts=trusted)  # type: ignore[arg-type]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        if client:
            scope.setdefault("state", {})[PEER_KEY] = str(client[0])
        await self._forwarded(scope, receive, send)  # type: ignore[arg-type]
