"""The OpenAI- and Anthropic-compatible routes: ``build_router(runtime) -> APIRouter``.

Routes (all behind bearer API keys unless ``settings.require_gateway_keys`` is false):

* ``GET /v1/models`` and ``GET /v1/models/{id}``: the registry's models, ids ``provider:model``
  (in the Anthropic shape when the client sends ``anthropic-version``);
* ``POST /v1/chat/completions``: OpenAI chat completions, streaming or not;
* ``POST /v1/messages``: Anthropic Messages, streaming or not (``x-api-key`` also accepted).

Each request is validated here (body size and shape, model id) and any refusal is the dialect's
error JSON with a 4xx status; nothing has started then. A valid request becomes one
``PromptResponse`` (see ``drupe.gateway.prompt``), which starts the caller-owned stream and
commits the HTTP response on the first meaningful chunk. Every route raises ``GatewayError``
for refusals; ``GatewayRoute`` renders it, so this router needs no app-level exception handler.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final

import orjson
from fastapi import APIRouter, Depends, Request, Response
from fastapi.routing import APIRoute

from drupe.errors import ConfigError
from drupe.gateway.anthropic_compat import (
    AnthropicDialect,
    anthropic_error_body,
    anthropic_model_object,
    anthropic_models_body,
    parse_messages_request,
)
from drupe.gateway.keys import KeyCache, key_dependency
from drupe.gateway.openai_compat import (
    OpenAIDialect,
    model_object,
    models_body,
    openai_error_body,
    parse_chat_request,
)
from drupe.gateway.prompt import (
    Dialect,
    GatewayError,
    GatewayFailure,
    PromptResponse,
    PromptSpec,
    PromptStream,
    json_response,
)
from drupe.persistence.records import ApiKeyRecord

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["GatewayRoute", "build_router"]

ErrorBody = Callable[[GatewayFailure], dict[str, Any]]


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


def _schema(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "required": required, "properties": properties}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


_MESSAGES: Final = {"type": "array", "minItems": 1, "items": {"type": "object"}}
_CHAT_BODY: Final = _schema(
    ["model", "messages"],
    {
        "model": {"type": "string", "example": "scripted:echo"},
        "messages": _MESSAGES,
        "stream": {"type": "boolean"},
        "max_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number"},
        "tools": {"type": "array", "items": {"type": "object"}},
    },
)
_MESSAGES_BODY: Final = _schema(
    ["model", "messages"],
    {
        "model": {"type": "string", "example": "scripted:echo"},
        "messages": _MESSAGES,
        "system": {"type": "string"},
        "max_tokens": {"type": "integer", "minimum": 1},
        "stream": {"type": "boolean"},
        "tools": {"type": "array", "items": {"type": "object"}},
    },
)


def _refusal(error_body: ErrorBody) -> Callable[[str], GatewayError]:
    def invalid(message: str) -> GatewayError:
        return GatewayError(GatewayFailure(400, "invalid_request", message), error_body)

    return invalid


async def _read_json(request: Request, runtime: Runtime, error_body: ErrorBody) -> Any:
    limit = runtime.settings.limits.max_body_bytes
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
        raise _refusal(error_body)("the request body is not valid JSON") from None


def _check_model(runtime: Runtime, model_id: str, error_body: ErrorBody) -> None:
    try:
        runtime.models.resolve(model_id)
    except ConfigError as err:
        raise GatewayError(GatewayFailure(404, "not_found", str(err)), error_body) from None


def _respond(runtime: Runtime, spec: PromptSpec, dialect: Dialect, *, stream: bool) -> Response:
    return PromptResponse(
        PromptStream(runtime, spec),
        dialect,
        streaming=stream,
        idle_timeout=runtime.settings.gateway_idle_timeout,
    )


def _is_anthropic(request: Request) -> bool:
    return "anthropic-version" in request.headers


def build_router(runtime: Runtime) -> APIRouter:
    """The ``/v1`` gateway routes over ``runtime``."""
    router = APIRouter(route_class=GatewayRoute, tags=["gateway"])
    cache = KeyCache()

    openai_auth = key_dependency(runtime, openai_error_body, allow_x_api_key=False, cache=cache)
    anthropic_auth = key_dependency(
        runtime, anthropic_error_body, allow_x_api_key=True, cache=cache
    )
    openai_key, anthropic_key = Depends(openai_auth), Depends(anthropic_auth)

    async def either_key(request: Request) -> ApiKeyRecord | None:
        if _is_anthropic(request):
            return await anthropic_auth(request)
        return await openai_auth(request)

    @router.get(
        "/v1/models",
        dependencies=[Depends(either_key)],
        summary="List models (OpenAI shape; Anthropic shape with an anthropic-version header)",
    )
    async def list_models(request: Request) -> Response:
        models = runtime.models.list_models()
        if _is_anthropic(request):
            return json_response(200, anthropic_models_body(models))
        return json_response(200, models_body(models))

    @router.get(
        "/v1/models/{model_id:path}",
        dependencies=[Depends(either_key)],
        summary="Retrieve one model",
    )
    async def get_model(request: Request, model_id: str) -> Response:
        anthropic = _is_anthropic(request)
        _check_model(runtime, model_id, anthropic_error_body if anthropic else openai_error_body)
        labels = {info.id: info.label for info in runtime.models.list_models()}
        if anthropic:
            return json_response(200, anthropic_model_object(model_id, labels.get(model_id)))
        return json_response(200, model_object(model_id))

    @router.post(
        "/v1/chat/completions",
        dependencies=[openai_key],
        openapi_extra=_CHAT_BODY,
        summary="Chat completions (OpenAI-compatible)",
    )
    async def chat_completions(request: Request) -> Response:
        body = await _read_json(request, runtime, openai_error_body)
        chat = parse_chat_request(body, _refusal(openai_error_body))
        _check_model(runtime, chat.model, openai_error_body)
        return _respond(runtime, chat.spec, OpenAIDialect(chat), stream=chat.stream)

    @router.post(
        "/v1/messages",
        dependencies=[anthropic_key],
        openapi_extra=_MESSAGES_BODY,
        summary="Messages (Anthropic-compatible)",
    )
    async def messages(request: Request) -> Response:
        body = await _read_json(request, runtime, anthropic_error_body)
        parsed = parse_messages_request(body, _refusal(anthropic_error_body))
        _check_model(runtime, parsed.model, anthropic_error_body)
        return _respond(runtime, parsed.spec, AnthropicDialect(parsed), stream=parsed.stream)

    return router
