"""The fake Anthropic Messages app (for tests and benchmarks through the real clients).

Owns: ``anthropic_app``: ``POST /v1/messages`` answers each request with the next
``FakeReply``, as SSE with named events (``message_start``, a content block per thinking, text
and tool use, ``message_delta``, ``message_stop``) or as one JSON body, and an HTTP error in
Anthropic's error shape (its error ``type`` per status) for a failure reply. Served by
``drupe.testing.fake_providers.fake_anthropic_server``.

Must never: contact anything; it only answers.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from drupe.testing.fake_replies import (
    FakeReply,
    Replies,
    ReplyQueue,
    RequestRecorder,
    paced,
    pieces,
    record,
    sse,
)

__all__ = ["anthropic_app"]

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_app(replies: Replies, recorder: RequestRecorder | None = None) -> Starlette:
    """The fake Messages API app (routes start with ``/v1``)."""
    queue = ReplyQueue(replies)

    async def messages(request: Request) -> Response:
        body = await record(request, recorder)
        reply = queue.take(body)
        if reply.status != 200:
            kind = _ANTHROPIC_ERROR_TYPES.get(reply.status, "api_error")
            error = {"type": "error", "error": {"type": kind, "message": reply.error}}
            return JSONResponse(error, reply.status, reply.error_headers())
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        if isinstance(body, dict) and body.get("stream"):
            events = _anthropic_events(reply, model)
            return StreamingResponse(paced(events, reply.interval), media_type="text/event-stream")
        return JSONResponse(_anthropic_message(reply, model))

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])


def _anthropic_stop(reply: FakeReply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def _anthropic_message(reply: FakeReply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "fake-sig"})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        arguments = json.loads(call.arguments_json)
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _anthropic_stop(reply),
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.usage_output_tokens},
    }


def _anthropic_events(reply: FakeReply, model: str) -> list[bytes]:
    start = _anthropic_message(reply, model)
    start.update(content=[], stop_reason=None)
    start["usage"] = {"input_tokens": reply.input_tokens, "output_tokens": 1}
    out = [sse({"type": "message_start", "message": start}, "message_start")]
    index = 0

    def block(head: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append(
            sse(
                {"type": "content_block_start", "index": index, "content_block": head},
                "content_block_start",
            )
        )
        for delta in deltas:
            out.append(
                sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1

    if reply.reasoning:
        thinking = [
            {"type": "thinking_delta", "thinking": p}
            for p in pieces(reply.reasoning, reply.chunk_chars)
        ]
        thinking.append({"type": "signature_delta", "signature": "fake-sig"})
        block({"type": "thinking", "thinking": "", "signature": ""}, thinking)
    if reply.text:
        out.append(sse({"type": "ping"}, "ping"))
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": p} for p in pieces(reply.text, reply.chunk_chars)],
        )
    for call in reply.tool_calls:
        block(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
            [
                {"type": "input_json_delta", "partial_json": p}
                for p in pieces(call.arguments_json, call.chunk_chars)
            ],
        )
    out.append(
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": _anthropic_stop(reply), "stop_sequence": None},
                "usage": {"output_tokens": reply.usage_output_tokens},
            },
            "message_delta",
        )
    )
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return out
