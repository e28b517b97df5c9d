"""The A2A routes: agent cards and one JSON-RPC endpoint per Drupe agent (thin shell).

* ``GET /a2a/{agent_id}/.well-known/agent-card.json``: the agent's card (``card.agent_card``).
* ``GET /.well-known/agent-card.json``: the default agent's card: the agent named
  ``default``, else the only agent; 404 when there is none (or several and no ``default``).
* ``POST /a2a/{agent_id}``: JSON-RPC 2.0, dispatched by ``a2a-sdk``'s ``JsonRpcDispatcher``
  (malformed JSON ``-32700``, not a request ``-32600``, unknown method ``-32601``, bad params
  ``-32602``, an ``A2A-Version`` other than 1.0 ``-32009``) to ``DrupeRequestHandler``. An
  unknown agent is 404, a missing or bad gateway key 401 (when keys are required), a key whose
  agent scope leaves the agent out 403 and one over its request budget 429, each with a
  JSON-RPC error body.

The SDK is imported on the first A2A request, not at boot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from drupe.gateway.access import GatewayAccess
from drupe.gateway.limits import check_agent_scope
from drupe.gateway.prompt import GatewayError, GatewayFailure
from drupe.http.state import get_caller

if TYPE_CHECKING:
    from drupe.app import Runtime
    from drupe.persistence.records import AgentRecord

__all__ = ["build_a2a_router"]

_MAX_ID = 256


def _rpc_error_body(failure: GatewayFailure) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": failure.message, "data": {"status": failure.status}},
    }


class _Sdk:
    """The SDK's dispatcher over Drupe's handler, built on first use."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._dispatcher: Any = None

    def dispatcher(self) -> Any:
        if self._dispatcher is None:
            from a2a.server.context import ServerCallContext
            from a2a.server.routes.common import DefaultServerCallContextBuilder
            from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

            from drupe.protocols.a2a.handler import DrupeRequestHandler

            class Builder(DefaultServerCallContextBuilder):
                def build(self, request: Request) -> ServerCallContext:
                    context = super().build(request)
                    context.state["agent_id"] = request.path_params["agent_id"]
                    context.state["principal"] = get_caller(request)
                    return context

            self._dispatcher = JsonRpcDispatcher(
                DrupeRequestHandler(self.runtime), context_builder=Builder()
            )
        return self._dispatcher


async def _default_agent(runtime: Runtime) -> AgentRecord | None:
    agents = await runtime.db.agents.list_agents()
    named = [a for a in agents if a.name == "default"]
    if named:
        return named[0]
    return agents[0] if len(agents) == 1 else None


def build_a2a_router(runtime: Runtime, access: GatewayAccess | None = None) -> APIRouter:
    router = APIRouter(tags=["a2a"])
    sdk = _Sdk(runtime)
    access = access or GatewayAccess(runtime)
    require_key = access.auth(_rpc_error_body, allow_x_api_key=False)

    def card_response(agent: AgentRecord, request: Request) -> Response:
        from a2a.server.request_handlers.response_helpers import agent_card_to_dict

        from drupe import __version__
        from drupe.protocols.a2a.card import agent_card

        card = agent_card(
            agent,
            base_url=str(request.base_url),
            version=__version__,
            keys_required=runtime.settings.require_gateway_keys,
        )
        return JSONResponse(agent_card_to_dict(card))

    async def known(agent_id: str) -> AgentRecord | None:
        if not 0 < len(agent_id) <= _MAX_ID:
            return None
        return await runtime.db.agents.get_agent(agent_id)

    @router.get("/.well-known/agent-card.json", summary="The default agent's A2A agent card")
    async def directory_card(request: Request) -> Response:
        agent = await _default_agent(runtime)
        if agent is None:
            return JSONResponse(
                {"detail": "no default agent: name one 'default', or see /a2a/{id}/..."},
                status_code=404,
            )
        return card_response(agent, request)

    @router.get("/a2a/{agent_id}/.well-known/agent-card.json", summary="An agent's A2A card")
    async def card(agent_id: str, request: Request) -> Response:
        agent = await known(agent_id)
        if agent is None:
            return JSONResponse({"detail": f"unknown agent {agent_id!r}"}, status_code=404)
        return card_response(agent, request)

    @router.post("/a2a/{agent_id}", summary="The agent's A2A JSON-RPC endpoint")
    async def rpc(agent_id: str, request: Request) -> Response:
        try:
            record = await require_key(request)
            refusal = check_agent_scope(record, agent_id)
            if refusal is not None:
                raise GatewayError(GatewayFailure(403, "forbidden", refusal), _rpc_error_body)
            await access.check_budget(record, _rpc_error_body)
        except GatewayError as err:
            return err.response()
        if await known(agent_id) is None:
            failure = GatewayFailure(404, "not_found", f"unknown agent {agent_id!r}")
            return JSONResponse(_rpc_error_body(failure), status_code=404)
        response: Response = await sdk.dispatcher().handle_requests(request)
        return response

    return router
