"""``AuthGate``: the ASGI guard that puts an identity on every request and refuses anonymous
ones (deny by default: a route added later is covered without doing anything).

Contract:

* Auth off (``--no-auth``, loopback only): every request is the one local admin.
* Otherwise the presented credential (``identity.credentials``) is resolved by the
  ``Authenticator`` and put on the request (``request.state.identity`` and
  ``request.state.principal``).
* A path that needs a user (everything under ``/api/`` but the sign-in routes, ``/metrics``
  and the API's schema and docs) answers 401 when there is no live credential, with a message
  that says what is wrong (none, malformed, unknown or revoked); a gateway key there is refused
  too (it acts only on ``/v1`` and the protocol routes, within its scopes).
* A trusted proxy header (``trusted_header``, e.g. ``X-Forwarded-User``) names the user of a
  request that presents no credential of its own, only when the request comes from one of
  ``trusted_proxies`` (the TCP peer's address, kept by ``http.peer``); from any other
  address the header is ignored.
* A signed-in browser (a session cookie, or a proxy's header) sending an unsafe request
  (POST, PUT, PATCH, DELETE) must show its own origin (``Origin``, checked by
  ``OriginCheck``) or the session's CSRF token (``X-CSRF-Token``); else 403.
* Other paths (the web UI's files, ``/healthz``, the gateway and protocol routes, IM webhooks)
  pass with whatever identity was presented: the gateway and the protocols require their own
  key, a webhook its platform's signature.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from typing import Final

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from drupe.admission.principal import LOCAL_ADMIN
from drupe.identity.authenticator import Authenticator, Identity
from drupe.identity.credentials import BadCredentials, presented

__all__ = ["PEER_KEY", "PUBLIC_PATHS", "AuthGate", "needs_user", "peer_of"]

PEER_KEY: Final = "peer"
"""Where ``http.peer.ForwardedPeer`` keeps the TCP peer's address in ``scope["state"]``."""


def peer_of(scope: Scope) -> str | None:
    """The TCP peer's address of a request (kept before any ``X-Forwarded-For`` rewrite)."""
    peer = (scope.get("state") or {}).get(PEER_KEY)
    if isinstance(peer, str):
        return peer
    client = scope.get("client")
    return str(client[0]) if client else None


PUBLIC_PATHS: Final = frozenset(
    (
        "/api/auth/login",
        "/api/auth/logout",
        "/api/auth/link",
        "/api/auth/methods",
        "/api/auth/oidc/login",
        "/api/auth/oidc/callback",
        "/api/auth/oidc/signed-out",
    )
)
_GUARDED_EXACT: Final = frozenset(("/metrics", "/openapi.json", "/docs", "/redoc"))
_UNSAFE: Final = frozenset(("POST", "PUT", "PATCH", "DELETE"))


def needs_user(path: str) -> bool:
    """Whether ``path`` answers only a signed-in caller."""
    if path in PUBLIC_PATHS:
        return False
    return path.startswith(("/api/", "/docs/")) or path in _GUARDED_EXACT


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = orjson.dumps({"detail": detail})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="drupe"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class AuthGate:
    def __init__(
        self,
        *,
        authenticator: Authenticator | None,
        allowed_origins: Iterable[str] = (),
        trusted_header: str | None = None,
        trusted_proxies: Iterable[str] = (),
    ) -> None:
        self.authenticator = authenticator
        """None: auth is off, every request is the local admin."""
        self.allowed_origins = frozenset(o.rstrip("/").lower() for o in allowed_origins)
        self.trusted_header = trusted_header.lower().encode() if trusted_header else None
        self.trusted_proxies = tuple(ipaddress.ip_network(p, strict=False) for p in trusted_proxies)

    def _from_trusted_proxy(self, scope: Scope) -> bool:
        peer = peer_of(scope)
        if peer is None or not self.trusted_proxies:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.trusted_proxies)

    async def _proxy_identity(self, scope: Scope, authenticator: Authenticator) -> Identity | None:
        if self.trusted_header is None:
            return None
        value = _header(scope, self.trusted_header)
        if value is None or not self._from_trusted_proxy(scope):
            return None
        return await authenticator.by_header(value)

    async def run(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Put the identity on ``scope`` and call ``app``, or refuse."""
        state = scope.setdefault("state", {})
        authenticator = self.authenticator
        if authenticator is None:
            state["identity"] = _LOCAL
            state["principal"] = _LOCAL.principal
            await app(scope, receive, send)
            return
        path: str = scope["path"]
        guarded = needs_user(path)
        try:
            credential = presented(scope.get("headers", ()))
        except BadCredentials as err:
            if guarded:
                await _refuse(send, 401, str(err))
                return
            credential = None
        if credential is not None:
            identity = await authenticator.resolve(credential)
        else:
            identity = await self._proxy_identity(scope, authenticator)
        if identity is not None:
            state["identity"] = identity
            state["principal"] = identity.principal
        if guarded:
            refusal = self._refusal(scope, identity, credential is not None)
            if refusal is not None:
                await _refuse(send, *refusal)
                return
        await app(scope, receive, send)

    def _refusal(
        self, scope: Scope, identity: Identity | None, presented_any: bool
    ) -> tuple[int, str] | None:
        if identity is None:
            if presented_any:
                return 401, "the credential is unknown, expired or revoked: sign in again"
            return 401, (
                "sign in first: POST /api/auth/login, or send 'Authorization: Bearer <token>' "
                "(a personal token from `drupe users token`)"
            )
        if identity.via == "key":
            return 401, (
                "a gateway API key works on /v1 and the protocol routes only; "
                "use a personal token (`drupe users token`) on /api"
            )
        if (
            identity.via in ("session", "header")
            and scope.get("method") in _UNSAFE
            and not self._same_site(scope, identity)
        ):
            return 403, (
                "a signed-in browser request that changes something must come from this "
                "site's pages (Origin) or carry the X-CSRF-Token header"
            )
        return None

    def _same_site(self, scope: Scope, identity: Identity) -> bool:
        token = _header(scope, b"x-csrf-token")
        expected = identity.csrf_token
        if token is not None and expected is not None:
            return hmac.compare_digest(token.encode(), expected.encode())
        origin = _header(scope, b"origin")
        if origin is None:
            return False
        host = _header(scope, b"host")
        own = f"{scope.get('scheme', 'http')}://{host}".lower() if host else None
        origin = origin.rstrip("/").lower()
        return origin == own or origin in self.allowed_origins


_LOCAL: Final = Identity(principal=LOCAL_ADMIN, via="local")


class LateAuthGate:
    """The middleware slot of the gate: the app is built before its runtime opens (the ASGI
    lifespan), so the gate (``app.state.auth_gate``, set by ``install_runtime``) is found per
    request; until then every request is refused with 503."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        gate: AuthGate | None = getattr(scope["app"].state, "auth_gate", None)
        if gate is None:
            if scope["type"] == "http":
                await _refuse(send, 503, "the server is starting: try again in a moment")
            return
        await gate.run(self.app, scope, receive, send)
