"""The OpenAI Responses API routes: ``POST /v1/responses``, ``GET``/``DELETE /v1/responses/{id}``.

A request runs on the same non-persisting prompt path as the other dialects
(``PromptStream`` + ``PromptResponse``), through ``ResponsesDialect``. Storage:

* ``store`` (default true, as in the OpenAI API): after a success terminal and BEFORE the
  client hears ``response.completed`` (or gets the body), the response is written to the
  database (``ResponseStore``) with every input item it answered, under the key that created
  it. A client can therefore chain from it at once.
* ``previous_response_id``: the stored response (of the SAME key; another key's is a 404) lends
  its input items and its output items as the head of the new input. Its ``instructions`` are
  not carried over.
* ``GET /v1/responses/{id}/input_items``: the stored input items as OpenAI's cursor page
  (``input_items.list``: ``after``, ``limit``, ``order``);
* ``GET /v1/responses/{id}`` returns the stored response object; ``DELETE`` removes it
  (``{"id", "object": "response.deleted", "deleted": true}``). Unknown or another key's: 404.

The dialect (``openai.types.responses``) is imported by the first request, never at boot.
An agent model (``agent:<id>``, ``agent-session:<id>``) runs an agent-session turn and answers
in this dialect; a chain there is refused (the session keeps the history).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from fastapi import APIRouter, Query, Request, Response

from drupe.gateway.access import request_caller
from drupe.gateway.agent_turns import is_agent_model
from drupe.gateway.dialect_routes import check_model, read_json, refusal, respond
from drupe.gateway.openai_compat import openai_error_body
from drupe.gateway.prompt import GatewayError, GatewayFailure, json_response
from drupe.gateway.responses_input import parse_responses_request
from drupe.persistence.records import ApiKeyRecord

if TYPE_CHECKING:
    from drupe.app import Runtime
    from drupe.gateway.access import GatewayAccess

__all__ = ["add_routes"]

_ID_MAX: Final = 128

_RESPONSES_BODY: Final = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["model", "input"],
                    "properties": {
                        "model": {"type": "string", "example": "scripted:echo"},
                        "input": {
                            "oneOf": [
                                {"type": "string"},
                                {"type": "array", "minItems": 1, "items": {"type": "object"}},
                            ]
                        },
                        "instructions": {"type": "string"},
                        "stream": {"type": "boolean"},
                        "store": {"type": "boolean"},
                        "previous_response_id": {"type": "string"},
                        "max_output_tokens": {"type": "integer", "minimum": 1},
                        "temperature": {"type": "number"},
                        "tools": {"type": "array", "items": {"type": "object"}},
                        "tool_choice": {},
                        "metadata": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        },
                    },
                }
            }
        },
    }
}


def input_items_page(
    items: list[dict[str, Any]], after: str | None, limit: int, order: str
) -> dict[str, Any]:
    """OpenAI's cursor page of input items: each item with its id (``msg_<n>`` for an item the
    client sent without one: stable, by position), newest first unless ``order`` is ``asc``,
    ``limit`` items after the cursor ``after``."""
    listed = [
        {"id": f"msg_{index:04d}", **item} if "id" not in item else dict(item)
        for index, item in enumerate(items)
    ]
    for item in listed:
        if item.get("type", "message") == "message":
            item.setdefault("type", "message")
            item.setdefault("status", "completed")
            content = item.get("content")
            if isinstance(content, str):
                item["content"] = [{"type": "input_text", "text": content}]
    if order == "desc":
        listed.reverse()
    ids = [item["id"] for item in listed]
    start = ids.index(after) + 1 if after in ids else 0
    page = listed[start : start + limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": start + limit < len(listed),
    }


def _not_found(response_id: str) -> GatewayError:
    return GatewayError(
        GatewayFailure(404, "not_found", f"no response with id {response_id!r}"),
        openai_error_body,
    )


def _output_as_input(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A stored response's output items, as the input items that replay them."""
    items: list[dict[str, Any]] = []
    for item in body.get("output") or []:
        if isinstance(item, dict) and item.get("type") in ("message", "function_call", "reasoning"):
            items.append(item)
    return items


def add_routes(router: APIRouter, runtime: Runtime, access: GatewayAccess, key_dep: Any) -> None:
    """Add the Responses API routes to the gateway ``router``."""
    store = runtime.db.responses

    @router.post(
        "/v1/responses",
        openapi_extra=_RESPONSES_BODY,
        summary="Create a model response (OpenAI Responses API)",
    )
    async def create_response(request: Request, key: ApiKeyRecord | None = key_dep) -> Response:
        body = await read_json(request, runtime, openai_error_body)
        fail = refusal(openai_error_body)
        parsed = parse_responses_request(body, fail)
        check_model(runtime, parsed.model, openai_error_body)
        key_id = key.id if key is not None else None
        history: list[dict[str, Any]] = []
        if parsed.previous_response_id is not None:
            if is_agent_model(parsed.model):
                raise fail(
                    "an agent session keeps its own history: send the new message to "
                    "model agent-session:<id> without previous_response_id"
                )
            previous = await store.get(parsed.previous_response_id[:_ID_MAX], key_id)
            if previous is None:
                raise _not_found(parsed.previous_response_id)
            history = [*previous.input_items, *_output_as_input(previous.body)]
        spec = parsed.spec(parsed.model, history, fail)
        await access.admit(key, parsed.model, openai_error_body)
        # The openai package's types cost a noticeable import: paid by the first request, not
        # by the server's boot (P7).
        from drupe.gateway.responses_dialect import ResponsesDialect, new_response_id

        dialect = ResponsesDialect(parsed, response_id=new_response_id())

        caller = request_caller(request)

        async def save() -> None:
            if parsed.store:
                await store.put(
                    response_id=dialect.id,
                    key_id=key_id,
                    model=parsed.model,
                    input_items=[*history, *parsed.items],
                    body=dialect.body(),
                )

        return await respond(
            runtime,
            spec,
            dialect,
            openai_error_body,
            stream=parsed.stream,
            on_end=access.charge(key, model=parsed.model, dialect="responses", caller=caller),
            before_success=save,
            caller=caller,
        )

    @router.get("/v1/responses/{response_id}", summary="Retrieve a stored response")
    async def get_response(response_id: str, key: ApiKeyRecord | None = key_dep) -> Response:
        found = (
            await store.get(response_id, key.id if key is not None else None)
            if len(response_id) <= _ID_MAX
            else None
        )
        if found is None:
            raise _not_found(response_id)
        return json_response(200, found.body)

    @router.get(
        "/v1/responses/{response_id}/input_items",
        summary="List a stored response's input items (OpenAI input_items.list)",
    )
    async def list_input_items(
        response_id: str,
        key: ApiKeyRecord | None = key_dep,
        after: str | None = Query(default=None, max_length=256),
        limit: int = Query(default=20, ge=1, le=100),
        order: Literal["asc", "desc"] = Query(default="desc"),
    ) -> Response:
        found = (
            await store.get(response_id, key.id if key is not None else None)
            if len(response_id) <= _ID_MAX
            else None
        )
        if found is None:
            raise _not_found(response_id)
        return json_response(200, input_items_page(found.input_items, after, limit, order))

    @router.delete("/v1/responses/{response_id}", summary="Delete a stored response")
    async def delete_response(response_id: str, key: ApiKeyRecord | None = key_dep) -> Response:
        deleted = len(response_id) <= _ID_MAX and await store.delete(
            response_id, key.id if key is not None else None
        )
        if not deleted:
            raise _not_found(response_id)
        return json_response(
            200, {"id": response_id, "object": "response.deleted", "deleted": True}
        )
