"""What every model route of the gateway shares: reading the body, refusing, checking the model,
and building the response of a prompt.

* ``GatewayRoute``: an ``APIRoute`` that renders a raised ``GatewayError`` in its dialect's
  error shape (so the gateway needs no app-level exception handler);
* ``read_json``: the body under ``limits.max_gateway_body_bytes`` (413) and valid JSON (400);
* ``refusal(error_body)``: the 400 builder the dialect parsers call;
* ``check_model``: 404 for a model id the registry cannot resolve (agent models are resolved
  with their session);
* ``respond``: a ``PromptResponse`` over a ``PromptStream``, or over an agent-session turn when
  the model is ``agent:<id>`` / ``agent-session:<id>``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

from drupe.admission.principal import Principal
from drupe.errors import ConfigError
from drupe.gateway.agent_turns import agent_turn, is_agent_model
from drupe.gateway.prompt import (
    Dialect,
    ErrorBodyFn,
    GatewayError,
    GatewayFailure,
    GatewayStream,
    PromptSpec,
    PromptStream,
)
from drupe.gateway.prompt_response import PromptResponse
from drupe.persistence.gateway_usage_meter import TokenUsage

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["GatewayRoute", "check_model", "read_json", "refusal", "respond"]

ErrorBody = ErrorBodyFn


class GatewayRoute(APIRoute):
    """An ``APIRoute`` that turns a ``GatewayError`` into the dialect's error response."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except GatewayError as err:
                return err.response()

        return route


def refusal(error_body: ErrorBody) -> Callable[[str], GatewayError]:
    def invalid(message: str) -> GatewayError:
        return GatewayError(GatewayFailure(400, "invalid_request", message), error_body)

    return invalid


async def read_json(request: Request, runtime: Runtime, error_body: ErrorBody) -> Any:
    limit = runtime.settings.limits.max_gateway_body_bytes
    too_large = GatewayError(
        GatewayFailure(413, "too_large", f"the request body is larger than {limit} bytes"),
        error_body,
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    raw = await request.body()
    if len(raw) > limit:
        raise too_large
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise refusal(error_body)("the request body is not valid JSON") from None


def check_model(runtime: Runtime, model_id: str, error_body: ErrorBody) -> None:
    """404 for a model id the registry cannot resolve (agent models are resolved later)."""
    if is_agent_model(model_id):
        return
    try:
        runtime.models.resolve(model_id)
    except ConfigError as err:
        raise GatewayError(GatewayFailure(404, "model_not_found", str(err)), error_body) from None


async def respond(
    runtime: Runtime,
    spec: PromptSpec,
    dialect: Dialect,
    error_body: ErrorBody,
    *,
    stream: bool,
    on_end: Callable[[TokenUsage], None] | None = None,
    before_success: Callable[[], Coroutine[Any, Any, None]] | None = None,
    caller: Principal | None = None,
) -> PromptResponse:
    """The response of one prompt: a gateway stream, or a turn of an agent session (of
    ``caller``: the user the request's key acts as)."""
    source: GatewayStream
    headers: dict[str, str] = {}
    if is_agent_model(spec.model_id):
        turn = await agent_turn(runtime, spec.model_id, spec.messages, error_body, caller)
        source, headers["x-drupe-session-id"] = turn.stream, turn.session_id
    else:
        source = PromptStream(runtime, spec)
    return PromptResponse(
        source,
        dialect,
        streaming=stream,
        idle_timeout=runtime.settings.gateway_idle_timeout,
        before_success=before_success,
        on_end=on_end,
        headers=headers,
    )
