"""``POST /ag-ui/{target}``: an AG-UI run as a Drupe turn (the thin shell over ``translate``).

* ``target``: a model id (the thread is the conversation ``threadId``, created when unknown),
  ``agent:<id>`` (the thread is that agent's session ``threadId``, created on first use) or
  ``agent-session:<id>`` (that session; ``threadId`` is only echoed).
* The turn is submitted through the ``Conversations`` port with a listener that follows its
  answer; the answer's chunks become AG-UI events (``translate.AguiRun``) encoded by the
  package's ``EventEncoder`` (SSE). A submit into a live thread follows the double-text
  strategy (``forwardedProps.strategy``, default ``enqueue``: the run streams the answer to
  this message, after the running one).
* Approvals: the run ends ``RUN_FINISHED`` with an ``interrupt`` outcome; the next run's
  ``resume`` entries answer them and stream the continuation.
* Reconnect: ``POST /ag-ui/connect/{target}`` (AG-UI's ``connect``): the thread's live answer
  from its start, 204 when nothing is live.
* Stop: ``POST /api/chat/{conversation}/stop`` (the run ends ``RUN_FINISHED`` ``cancelled``,
  its partial answer stored). Closing the connection only detaches: the answer goes on.
* Bad input (a body that is no ``RunAgentInput``, an unknown model, agent or session, a
  refused strategy) is a 4xx whose JSON body is a ``RUN_ERROR`` event; nothing is stored.
  The same bearer gateway keys as ``/v1`` are required when ``require_gateway_keys`` is on.

A target's thread is resolved (and a new session made) by ``threads``. The handlers live in
``handlers``, imported on the first AG-UI call: building this router (at every boot, so that
the OpenAPI schema lists it) imports neither them nor the ``ag_ui`` package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request, Response

from drupe.gateway.access import GatewayAccess
from drupe.gateway.dialect_routes import GatewayRoute
from drupe.persistence.records import ApiKeyRecord

if TYPE_CHECKING:
    from fastapi import APIRouter

    from drupe.app import Runtime
    from drupe.gateway.prompt import GatewayFailure

__all__ = ["build_agui_router", "run_error_body"]


def run_error_body(failure: GatewayFailure) -> dict[str, Any]:
    """A refusal in AG-UI's shape (``threads.run_error_body``, imported on the first refusal)."""
    from drupe.protocols.agui.threads import run_error_body as body

    return body(failure)


def build_agui_router(runtime: Runtime, access: GatewayAccess | None = None) -> APIRouter:
    from fastapi import APIRouter

    router = APIRouter(route_class=GatewayRoute, tags=["ag-ui"])
    gate = access or GatewayAccess(runtime)
    key_dep = Depends(gate.auth(run_error_body, allow_x_api_key=False))

    @router.post(
        "/ag-ui/connect/{target:path}",
        summary="Reconnect to a thread's live run (AG-UI events from the answer's start)",
        response_class=Response,
    )
    async def connect(
        target: str, request: Request, key: ApiKeyRecord | None = key_dep
    ) -> Response:
        """An AG-UI ``connect``: the live (or just ended) answer of the thread, from its start;
        204 when nothing is live."""
        from drupe.protocols.agui import handlers

        return await handlers.connect(runtime, target, request)

    @router.post(
        "/ag-ui/{target:path}",
        summary="Run an AG-UI agent (RunAgentInput in, AG-UI events out as SSE)",
        response_class=Response,
    )
    async def run_agent(
        target: str, request: Request, key: ApiKeyRecord | None = key_dep
    ) -> Response:
        from drupe.protocols.agui import handlers

        return await handlers.run_agent(runtime, gate, target, request, key)

    return router
