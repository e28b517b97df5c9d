"""The FastAPI app factory: routes, guards, error mapping, metrics and the static UI.

* ``create_app(runtime, extra_routers=())`` builds an app over an already open ``Runtime``
  (tests, embedding). ``create_app_with_lifespan(settings)`` builds one that opens the runtime
  in the ASGI lifespan and closes it (aborting live streams, persisting partials) on shutdown:
  that is what ``drupe serve`` runs.
* The OpenAI/Anthropic gateway router comes from ``drupe.gateway.router.build_router(runtime)``
  when that module exists; ``extra_routers`` are included after it.
* Guards (outermost first): ``ForwardedPeer`` (keeps the TCP peer, then applies
  ``X-Forwarded-*`` from trusted hosts as uvicorn would), request body cap (413), the
  ``Origin`` check on ``/api/`` (403), then the identity gate (``drupe.identity.gate``: 401
  for an anonymous ``/api/`` request; built when the runtime is installed, so an app without
  a runtime answers 503).
  Exceptions map to HTTP only in ``drupe.http.errors``.
* Anything no route claims goes to the built web UI (``static_ui``).
* The app is a ``DrupeApp``: an SSE response streams after the request's own stack has unwound
  (no middleware, routing or FastAPI frames kept per live connection).
* The lifespan owns the app's ``StreamRevoker`` (``drupe.identity.revocation``: the streams
  of a revoked sign-in end within ``AuthSettings.sweep_seconds``) and its ``PingTicker``
  (``app.state.ping_ticker``): one task that pings every idle SSE connection (an app whose
  lifespan does not run times each ping per connection).

Routes never own a stream's tasks: they dispatch to the runtime, whose manager owns them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from starlette.types import Receive, Scope, Send

from drupe.api import (
    agent_routes,
    auth_routes,
    branches,
    channel_routes,
    chat_account_routes,
    chat_routes,
    conversation_routes,
    export_routes,
    key_routes,
    limits_routes,
    oidc_routes,
    search_routes,
    settings_routes,
    system_routes,
    task_routes,
    trace_routes,
    usage_routes,
    user_routes,
)
from drupe.api.model_titles import Titler
from drupe.api.static_ui import StaticUI
from drupe.gateway.access import GatewayAccess
from drupe.gateway.refusals import dialect_refusal, is_gateway_path
from drupe.gateway.router import build_router
from drupe.http.errors import install_error_handlers
from drupe.http.guards import BodyLimit, OriginCheck
from drupe.http.peer import ForwardedPeer
from drupe.http.ping_ticker import PingTicker
from drupe.http.sse_response import HANDOFF_KEY, SseHandoff
from drupe.http.state import StatusBoard
from drupe.identity.gate import AuthGate, LateAuthGate
from drupe.identity.revocation import StreamRevoker
from drupe.protocols.routes import REFUSAL_BODIES, build_protocol_routers
from drupe.settings import Settings

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["DrupeApp", "create_app", "create_app_with_lifespan", "install_runtime"]

log = logging.getLogger(__name__)


class DrupeApp(FastAPI):
    """FastAPI whose SSE responses stream after the request's own stack has unwound.

    Each HTTP request gets an empty hand-off slot (``sse_response.HANDOFF_KEY``); an
    ``SseResponse`` fills it instead of streaming inside the middleware, routing and endpoint
    frames, and is streamed here. Everything before the response (guards, routing,
    validation, the endpoint, error mapping) runs exactly as in FastAPI; what FastAPI ends
    when the endpoint's response returns (``yield`` dependencies, its own request telemetry)
    therefore ends before the stream does.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        slot: list[SseHandoff] = []
        scope[HANDOFF_KEY] = slot
        try:
            await super().__call__(scope, receive, send)
        except BaseException:
            for response, *_ in slot:
                response.abandon()
            raise
        if not slot:
            return
        del scope[HANDOFF_KEY]
        # The server keeps the scope for the connection's life: drop FastAPI's per-request
        # bookkeeping (its exit stacks, closed now that the request's stack has returned).
        for key in [key for key in scope if key.startswith("fastapi_")]:
            del scope[key]
        response, ticker, receive, send = slot.pop()
        revoker: StreamRevoker | None = getattr(self.state, "stream_revoker", None)
        identity = scope.get("state", {}).get("identity")
        if revoker is not None and identity is not None:
            revoker.add(response.buffer, identity)  # ended when its sign-in is revoked
        try:
            await response.stream(ticker, receive, send)
        except Exception:  # as the app's last-resort handler (errors.on_unexpected) logs it
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            raise
        finally:
            if revoker is not None:
                revoker.discard(response.buffer)


def _base_app(settings: Settings, lifespan: Any = None) -> FastAPI:
    from drupe import __version__

    app = DrupeApp(
        title="Drupe",
        version=__version__,
        description=(
            "A self-hosted AI conversation runtime. The UI stream routes speak the Vercel AI "
            "SDK UI message stream (v1); the /v1 routes are OpenAI/Anthropic compatible."
        ),
        lifespan=lifespan,
    )
    app.state.board = StatusBoard()
    app.state.titler = Titler()
    app.state.runtime = None
    app.state.auth_gate = None
    app.state.close_gateway = None
    app.state.gateway_access = None
    app.state.ping_ticker = None
    app.state.stream_revoker = None
    install_error_handlers(app)
    # The channels' catch-all /channels/{id}/{path} must win over the gateway's
    # /{provider}/v1/messages; the gateway router goes right after it (install_runtime).
    app.include_router(channel_routes.router)
    app.state.gateway_slot = len(app.router.routes)
    app.include_router(system_routes.router)
    app.include_router(auth_routes.router)
    app.include_router(chat_account_routes.router)
    app.include_router(user_routes.router)
    app.include_router(chat_routes.router)
    app.include_router(conversation_routes.router)
    app.include_router(search_routes.router)
    app.include_router(export_routes.router)
    app.include_router(branches.router)
    app.include_router(limits_routes.router)
    app.include_router(agent_routes.router)
    app.include_router(task_routes.router)
    app.include_router(oidc_routes.router)
    app.include_router(trace_routes.router)
    app.include_router(usage_routes.router)
    app.include_router(key_routes.router)
    app.include_router(settings_routes.router)
    app.router.default = StaticUI()
    app.add_middleware(LateAuthGate)
    app.add_middleware(OriginCheck, allowed=settings.allowed_origins)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.limits.max_body_bytes,
        refusals=REFUSAL_BODIES,
        wider=is_gateway_path,
        wider_max_bytes=settings.limits.max_gateway_body_bytes,
        shape_of=dialect_refusal,
    )
    app.add_middleware(ForwardedPeer)  # outermost: the TCP peer, then X-Forwarded-*
    return app


@asynccontextmanager
async def _revoker(runtime: Runtime) -> AsyncIterator[StreamRevoker | None]:
    """The sweep that ends revoked sign-ins' streams (none with auth off)."""
    if runtime.authenticator is None:
        yield None
        return
    revoker = StreamRevoker(
        runtime.db, runtime.authenticator, interval=runtime.settings.auth.sweep_seconds
    )
    async with revoker:
        yield revoker


def install_runtime(
    app: FastAPI, runtime: Runtime, extra_routers: Iterable[APIRouter] = ()
) -> None:
    """Bind ``runtime`` to ``app``: state, status observer, metrics, gateway routers."""
    from drupe.api.system_routes import metrics_registry

    app.state.runtime = runtime
    app.state.auth_gate = AuthGate(
        authenticator=runtime.authenticator,
        allowed_origins=runtime.settings.allowed_origins,
        trusted_header=runtime.settings.auth.trusted_header,
        trusted_proxies=runtime.settings.auth.trusted_proxies,
    )
    board: StatusBoard = app.state.board
    board.max_entries = runtime.manager.config.max_status_records
    removers = [
        runtime.manager.add_status_observer(board.observe),
        runtime.conversations.add_remote_observer(board.observe_remote),  # other nodes'
    ]
    app.state.remove_observer = lambda: [remove() for remove in removers]
    app.state.metrics = metrics_registry(runtime.manager)
    access = GatewayAccess(runtime)  # one key cache and budget for /v1 and the protocols
    app.state.gateway_access = access
    gateway = build_router(runtime, access=access)
    app.state.close_gateway = getattr(gateway, "aclose", None)
    app.include_router(gateway)
    # Early in line: the router tries its routes in order, and ~50 /api routes in front
    # of /v1/chat/completions cost more CPU than the pass-through's own work.
    routes = app.router.routes
    routes.insert(app.state.gateway_slot, routes.pop())
    for router in build_protocol_routers(runtime, access):  # AG-UI, A2A
        app.include_router(router)
    for router in extra_routers:
        app.include_router(router)
    app.openapi_schema = None


async def _close_routes(app: FastAPI) -> None:
    """What the routes own: the gateway's pooled upstream connections, and the Redis pools of
    the sign-in and gateway-key windows (cluster mode)."""
    owners = (app.state.gateway_access, getattr(app.state, "login_limiter", None))
    async with AsyncExitStack() as stack:  # every one is closed, whichever fails
        if app.state.close_gateway is not None:
            stack.push_async_callback(app.state.close_gateway)
        for owner in owners:
            if owner is not None:
                stack.push_async_callback(owner.aclose)


def create_app(runtime: Runtime, *, extra_routers: Iterable[APIRouter] = ()) -> FastAPI:
    """The HTTP edge over an open runtime (the caller closes the runtime; the app's lifespan
    closes only what the routes own, ``_close_routes``)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            async with (
                PingTicker() as app.state.ping_ticker,
                app.state.titler,
                _revoker(runtime) as app.state.stream_revoker,
            ):
                yield
        finally:
            app.state.ping_ticker = None
            app.state.stream_revoker = None
            await _close_routes(app)

    app = _base_app(runtime.settings, lifespan)
    install_runtime(app, runtime, extra_routers)
    return app


def create_app_with_lifespan(
    settings: Settings | None = None, *, extra_routers: Iterable[APIRouter] = ()
) -> FastAPI:
    """An app that opens the runtime on startup and closes it on shutdown."""
    from drupe.app import open_runtime

    settings = (settings or Settings.from_env()).with_file_tables()
    routers = list(extra_routers)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings) as runtime:
            install_runtime(app, runtime, routers)
            try:
                async with (
                    PingTicker() as app.state.ping_ticker,
                    app.state.titler,
                    _revoker(runtime) as app.state.stream_revoker,
                ):
                    yield
            finally:
                app.state.ping_ticker = None
                app.state.stream_revoker = None
                app.state.remove_observer()
                await _close_routes(app)
                app.state.runtime = None

    return _base_app(settings, lifespan)
