"""The OpenAI- and Anthropic-compatible routes: ``build_router(runtime) -> APIRouter``.

Routes (all behind bearer API keys unless ``settings.require_gateway_keys`` is false):

* ``GET /v1/models`` and ``GET /v1/models/{id}``: the registry's models, ids ``provider:model``
  (in the Anthropic shape when the client sends ``anthropic-version``);
* ``POST /v1/chat/completions``: OpenAI chat completions, streaming or not;
* ``POST /v1/messages``: Anthropic Messages, streaming or not (``x-api-key`` also accepted);
* ``POST /{provider}/v1/messages``: Anthropic Messages pinned to one provider (the ``model``
  is the id without its ``provider:`` prefix, as an Anthropic client sends it);
* ``POST /v1/messages/count_tokens`` (and pinned): the request's input tokens as its model
  counts them (exact for scripted models; the provider's own count where it has one);
* ``POST /v1/responses``, ``GET``/``DELETE /v1/responses/{id}``,
  ``GET /v1/responses/{id}/input_items``: the OpenAI Responses API
  (``drupe.gateway.responses``);
* ``GET /v1/agents``: the agents a key may drive. The model ``agent:<agentId>`` (a new
  session) or ``agent-session:<sessionId>`` runs a turn on an agent session through Chat
  Completions or Responses (``drupe.gateway.agent_turns``);
* ``GET /v1/mcps`` and ``/v1/mcps/{server_id}/mcp``: the MCP proxy (``drupe.gateway.mcp_proxy``).

Every model route checks, in order: the key (401), the body (413/400), the model (404), the
key's scope (403) and budgets (429 with ``Retry-After``) (``drupe.gateway.access``).

Each request is validated here (body size and shape, model id) and any refusal is the dialect's
error JSON with a 4xx status; nothing has started then. A valid request becomes one
``PromptResponse`` (see ``drupe.gateway.prompt_response``), which starts the caller-owned stream and
commits the HTTP response on the first meaningful chunk. Every route raises ``GatewayError``
for refusals; ``GatewayRoute`` renders it, so this router needs no app-level exception handler.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from fastapi import APIRouter, Depends, Request, Response

from drupe.gateway import mcp_proxy, responses
from drupe.gateway.access import GatewayAccess, request_caller
from drupe.gateway.agent_turns import is_agent_model
from drupe.gateway.anthropic_compat import (
    AnthropicDialect,
    anthropic_error_body,
    anthropic_model_object,
    anthropic_models_body,
    parse_messages_request,
)
from drupe.gateway.dialect_routes import (
    ErrorBody,
    GatewayRoute,
    check_model,
    read_json,
    refusal,
    respond,
)
from drupe.gateway.limits import check_agent_scope, check_scope
from drupe.gateway.openai_compat import (
    OpenAIDialect,
    model_object,
    models_body,
    openai_error_body,
    parse_chat_request,
)
from drupe.gateway.passthrough import Passthrough
from drupe.gateway.prompt import (
    GatewayError,
    GatewayFailure,
    PromptSpec,
    json_response,
)
from drupe.persistence.records import ApiKeyRecord

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["GatewayRoute", "GatewayRouter", "build_router"]


class GatewayRouter(APIRouter):
    """The ``/v1`` routes and what they own: the pass-through's pooled upstream clients."""

    passthrough: Passthrough | None = None

    async def aclose(self) -> None:
        """Close the pooled upstream connections (the app's lifespan calls it)."""
        if self.passthrough is not None:
            await self.passthrough.aclose()


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


def _is_anthropic(request: Request) -> bool:
    return "anthropic-version" in request.headers


def build_router(
    runtime: Runtime,
    *,
    access: GatewayAccess | None = None,
    passthrough: Passthrough | None = None,
) -> GatewayRouter:
    """The ``/v1`` gateway routes over ``runtime``."""
    router = GatewayRouter(route_class=GatewayRoute, tags=["gateway"])
    access = access or GatewayAccess(runtime)
    fast = router.passthrough = passthrough or Passthrough(runtime)

    openai_auth = access.auth(openai_error_body, allow_x_api_key=False)
    anthropic_auth = access.auth(anthropic_error_body, allow_x_api_key=True)
    openai_key, anthropic_key = Depends(openai_auth), Depends(anthropic_auth)

    async def either_auth(request: Request) -> ApiKeyRecord | None:
        if _is_anthropic(request):
            return await anthropic_auth(request)
        return await openai_auth(request)

    either_key = Depends(either_auth)
    _add_model_routes(router, runtime, either_key)
    _add_completion_routes(router, runtime, access, fast, openai_key)
    _add_messages_routes(router, runtime, access, anthropic_key)
    _add_agent_routes(router, runtime, openai_key)
    responses.add_routes(router, runtime, access, openai_key)
    mcp_proxy.add_routes(router, runtime, openai_key)
    return router


def _add_model_routes(router: GatewayRouter, runtime: Runtime, either_key: Any) -> None:
    """``GET /v1/models`` and ``/v1/models/{id}`` (the OpenAI shape, or the Anthropic one when
    the client sends ``anthropic-version``)."""

    @router.get(
        "/v1/models",
        summary="List models (OpenAI shape; Anthropic shape with an anthropic-version header)",
    )
    async def list_models(request: Request, key: ApiKeyRecord | None = either_key) -> Response:
        # Only what can answer (GET /api/models says why the others cannot).
        models = [m for m in runtime.models.answerable_models() if check_scope(key, m.id) is None]
        if _is_anthropic(request):
            return json_response(200, anthropic_models_body(models))
        return json_response(200, models_body(models))

    @router.get("/v1/models/{model_id:path}", summary="Retrieve one model")
    async def get_model(
        request: Request, model_id: str, key: ApiKeyRecord | None = either_key
    ) -> Response:
        anthropic = _is_anthropic(request)
        error_body = anthropic_error_body if anthropic else openai_error_body
        if is_agent_model(model_id):
            raise GatewayError(
                GatewayFailure(404, "not_found", "agents are listed at GET /v1/agents"),
                error_body,
            )
        check_model(runtime, model_id, error_body)
        refusal_message = check_scope(key, model_id)
        if refusal_message is not None:
            raise GatewayError(GatewayFailure(403, "forbidden", refusal_message), error_body)
        labels = {info.id: info.label for info in runtime.models.list_models()}
        if anthropic:
            return json_response(200, anthropic_model_object(model_id, labels.get(model_id)))
        return json_response(200, model_object(model_id))


def _add_completion_routes(
    router: GatewayRouter,
    runtime: Runtime,
    access: GatewayAccess,
    fast: Passthrough,
    openai_key: Any,
) -> None:
    """Chat Completions (with the pass-through to OpenAI-wire providers)."""

    @router.post(
        "/v1/chat/completions",
        openapi_extra=_CHAT_BODY,
        summary="Chat completions (OpenAI-compatible; model agent:<id> runs an agent turn)",
    )
    async def chat_completions(request: Request, key: ApiKeyRecord | None = openai_key) -> Response:
        body = await read_json(request, runtime, openai_error_body)
        chat = parse_chat_request(body, refusal(openai_error_body))
        check_model(runtime, chat.model, openai_error_body)
        await access.admit(key, chat.model, openai_error_body)
        caller = request_caller(request)
        on_end = access.charge(key, model=chat.model, dialect="chat-completions", caller=caller)
        upstream = fast.upstream(chat.model)
        if upstream is not None:  # an OpenAI-wire provider: forwarded as-is
            return fast.respond(upstream, body, chat, on_end=on_end)
        return await respond(
            runtime,
            chat.spec,
            OpenAIDialect(chat),
            openai_error_body,
            stream=chat.stream,
            on_end=on_end,
            caller=caller,
        )


def _add_messages_routes(
    router: GatewayRouter, runtime: Runtime, access: GatewayAccess, anthropic_key: Any
) -> None:
    """Anthropic Messages and ``messages.count_tokens`` (also pinned to one provider)."""

    async def anthropic_messages(
        request: Request, key: ApiKeyRecord | None, provider: str | None
    ) -> Response:
        body = await read_json(request, runtime, anthropic_error_body)
        parsed = parse_messages_request(body, refusal(anthropic_error_body))
        model_id = _pinned(provider, parsed.model, anthropic_error_body)
        check_model(runtime, model_id, anthropic_error_body)
        await access.admit(key, model_id, anthropic_error_body)
        spec = replace(parsed.spec, model_id=model_id)
        caller = request_caller(request)
        return await respond(
            runtime,
            spec,
            AnthropicDialect(parsed),
            anthropic_error_body,
            stream=parsed.stream,
            on_end=access.charge(key, model=model_id, dialect="messages", caller=caller),
            caller=caller,
        )

    async def count_tokens(
        request: Request, key: ApiKeyRecord | None, provider: str | None
    ) -> Response:
        body = await read_json(request, runtime, anthropic_error_body)
        if isinstance(body, dict):
            body = {"max_tokens": 1, **body}  # a count names no output budget
        parsed = parse_messages_request(body, refusal(anthropic_error_body))
        model_id = _pinned(provider, parsed.model, anthropic_error_body)
        check_model(runtime, model_id, anthropic_error_body)
        refused = check_scope(key, model_id)
        if refused is not None:
            raise GatewayError(GatewayFailure(403, "forbidden", refused), anthropic_error_body)
        tokens = await count_input_tokens(runtime, replace(parsed.spec, model_id=model_id))
        if tokens is None:
            message = f"model {model_id!r} has no token count (its provider offers none)"
            raise GatewayError(
                GatewayFailure(400, "invalid_request", message), anthropic_error_body
            )
        return json_response(200, {"input_tokens": tokens})

    @router.post(
        "/v1/messages/count_tokens",
        openapi_extra=_MESSAGES_BODY,
        summary="Count a Messages request's input tokens (Anthropic messages.count_tokens)",
    )
    async def messages_count_tokens(
        request: Request, key: ApiKeyRecord | None = anthropic_key
    ) -> Response:
        return await count_tokens(request, key, None)

    @router.post(
        "/{provider}/v1/messages/count_tokens",
        openapi_extra=_MESSAGES_BODY,
        summary="Count a Messages request's input tokens, pinned to one provider",
    )
    async def provider_count_tokens(
        request: Request, provider: str, key: ApiKeyRecord | None = anthropic_key
    ) -> Response:
        return await count_tokens(request, key, provider)

    @router.post(
        "/v1/messages",
        openapi_extra=_MESSAGES_BODY,
        summary="Messages (Anthropic-compatible)",
    )
    async def messages(request: Request, key: ApiKeyRecord | None = anthropic_key) -> Response:
        return await anthropic_messages(request, key, None)

    @router.post(
        "/{provider}/v1/messages",
        openapi_extra=_MESSAGES_BODY,
        summary="Messages (Anthropic-compatible) pinned to one provider",
    )
    async def provider_messages(
        request: Request, provider: str, key: ApiKeyRecord | None = anthropic_key
    ) -> Response:
        return await anthropic_messages(request, key, provider)


def _add_agent_routes(router: GatewayRouter, runtime: Runtime, openai_key: Any) -> None:
    """``GET /v1/agents``: the agents a key may drive (as models ``agent:<id>``)."""

    @router.get("/v1/agents", summary="List the agents this key may drive")
    async def list_agents(key: ApiKeyRecord | None = openai_key) -> Response:
        records = await runtime.db.agents.list_agents()
        data = [
            {
                "id": record.id,
                "object": "agent",
                "name": record.name,
                "model": f"agent:{record.id}",
                "agent_model": record.model_id,
                "driver": record.driver_type,
                "created": int(record.created_at.timestamp()),
            }
            for record in records
            if check_agent_scope(key, record.id) is None
        ]
        return json_response(200, {"object": "list", "data": data})


async def count_input_tokens(runtime: Runtime, spec: PromptSpec) -> int | None:
    """The input tokens of ``spec`` as its model counts them: exact for the scripted models
    (the usage a request reports), the provider's own count where pydantic-ai's model has one
    (Anthropic, Google, OpenAI Responses, Bedrock); None when the model has no count."""
    from pydantic_ai.models import ModelRequestParameters

    from drupe.agent.convert import to_model_messages

    model = runtime.models.resolve(spec.model_id).model
    try:
        usage = await model.count_tokens(
            to_model_messages(spec.messages), None, ModelRequestParameters()
        )
    except NotImplementedError:
        return None
    return usage.input_tokens


def _pinned(provider: str | None, model: str, error_body: ErrorBody) -> str:
    """The registry id of ``model`` under the route's pinned ``provider``."""
    if provider is None:
        return model
    if not provider or len(provider) > 64:
        raise refusal(error_body)("the provider in the path is empty or too long")
    if is_agent_model(model):
        raise refusal(error_body)("agent models are not pinned to a provider: use /v1/messages")
    if model.startswith(f"{provider}:"):
        return model
    if ":" in model:
        raise refusal(error_body)(
            f"model {model!r} names another provider than the route's {provider!r}"
        )
    return f"{provider}:{model}"
