"""The fake OpenAI chat-completions app (for tests and benchmarks through the real clients).

Owns: ``openai_app``: ``POST /v1/chat/completions`` answers each request with the next
``FakeReply``, as SSE ``data:`` chunks ending in ``data: [DONE]`` (with a final ``usage`` chunk
when ``stream_options.include_usage``) or as one JSON body, and an HTTP error in OpenAI's error
shape for a failure reply; ``GET /v1/models`` lists one model. Served by
``drupe.testing.fake_providers.fake_openai_server``.

Must never: contact anything; it only answers.
"""

from __future__ import annotations

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

__all__ = ["openai_app"]


def openai_app(replies: Replies, recorder: RequestRecorder | None = None) -> Starlette:
    """The fake chat-completions app (mount it at the root; routes start with ``/v1``)."""
    queue = ReplyQueue(replies)

    async def completions(request: Request) -> Response:
        body = await record(request, recorder)
        reply = queue.take(body)
        if reply.status != 200:
            error = {"message": reply.error, "type": "error", "param": None, "code": None}
            return JSONResponse({"error": error}, reply.status, reply.error_headers())
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        if isinstance(body, dict) and body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _openai_chunks(reply, model, include_usage=include_usage)
            return StreamingResponse(paced(chunks, reply.interval), media_type="text/event-stream")
        return JSONResponse(_openai_completion(reply, model))

    async def models(request: Request) -> Response:
        await record(request, recorder)
        data = [{"id": "fake-1", "object": "model", "created": 0, "owned_by": "drupe"}]
        return JSONResponse({"object": "list", "data": data})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


def _openai_usage(reply: FakeReply) -> dict[str, int]:
    output = reply.usage_output_tokens
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": output,
        "total_tokens": reply.input_tokens + output,
    }


def _openai_finish(reply: FakeReply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def _openai_completion(reply: FakeReply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _openai_finish(reply)}],
        "usage": _openai_usage(reply),
    }


def _openai_chunks(reply: FakeReply, model: str, *, include_usage: bool) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": p}) for p in pieces(reply.reasoning, reply.chunk_chars)]
    out += [chunk({"content": p}) for p in pieces(reply.text, reply.chunk_chars)]
    for index, call in enumerate(reply.tool_calls):
        head = {"index": index, "id": call.id, "type": "function"}
        out.append(
            chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        )
        for piece in pieces(call.arguments_json, call.chunk_chars):
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(chunk({}, _openai_finish(reply)))
    if include_usage:
        usage = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": _openai_usage(reply),
        }
        out.append(sse(usage))
    out.append(b"data: [DONE]\n\n")
    return out
