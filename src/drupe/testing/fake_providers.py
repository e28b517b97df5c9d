"""Fake OpenAI chat-completions and Anthropic Messages servers on loopback.

Owns two small Starlette apps served by uvicorn on ``127.0.0.1`` with an ephemeral port, for
tests and benchmarks that must go through the real client libraries (``openai``,
``anthropic``) and pydantic-ai's wire code:

- OpenAI: ``POST /v1/chat/completions`` (SSE ``data:`` chunks ending in ``data: [DONE]``, or
  one JSON body) and ``GET /v1/models``;
- Anthropic: ``POST /v1/messages`` (SSE with named events ``message_start`` ...
  ``message_stop``, or one JSON body).

Replies are scripted with :class:`FakeReply` (text deltas, reasoning, tool calls whose JSON
arguments stream in slices, usage, HTTP errors with ``Retry-After``). Each POST takes the next
reply; the last one repeats. A :class:`RequestRecorder` keeps every request body so tests can
assert what was sent. The servers are async context managers run in an anyio task group::

    async with fake_openai_server([FakeReply.failure(429, retry_after=1), FakeReply("hi")]) as url:
        ...  # url is the client's base_url: "http://127.0.0.1:PORT/v1"

For Anthropic the yielded URL is the server root (the SDK appends ``/v1/messages``). This
module binds loopback only and never contacts anything else. ``python -m
drupe.testing.fake_providers`` runs one as a standalone fake upstream (for benchmarks).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "FakeReply",
    "FakeToolCall",
    "RecordedRequest",
    "RequestRecorder",
    "anthropic_app",
    "fake_anthropic_server",
    "fake_openai_server",
    "openai_app",
    "serve_app",
]


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A tool call in a reply; its JSON arguments stream in ``chunk_chars`` slices."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str = "call_1"
    chunk_chars: int = 8

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments))


@dataclass(frozen=True, slots=True)
class FakeReply:
    """One scripted answer: text, reasoning and tool calls, or an HTTP error (``status``)."""

    text: str = ""
    tool_calls: Sequence[FakeToolCall] = ()
    reasoning: str = ""
    status: int = 200
    error: str = "scripted error"
    retry_after: float | None = None
    input_tokens: int = 10
    output_tokens: int | None = None
    #: None: one delta per word; else slices of this many characters
    chunk_chars: int | None = None
    #: seconds between streamed deltas (0: as fast as possible)
    interval: float = 0.0

    @classmethod
    def failure(
        cls, status: int, message: str = "scripted error", *, retry_after: float | None = None
    ) -> FakeReply:
        return cls(status=status, error=message, retry_after=retry_after)

    @property
    def usage_output_tokens(self) -> int:
        if self.output_tokens is not None:
            return self.output_tokens
        words = len(self.text.split()) + len(self.reasoning.split())
        return words + sum(len(c.arguments_json.split()) for c in self.tool_calls)

    def error_headers(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        seconds = self.retry_after
        return {"retry-after": str(int(seconds)) if float(seconds).is_integer() else str(seconds)}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class RequestRecorder:
    """Every request a fake server received, in order."""

    requests: list[RecordedRequest] = field(default_factory=list)

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests if r.method == "POST"]


Replies = Sequence[FakeReply] | Callable[[Any], FakeReply]


class _ReplyQueue:
    def __init__(self, replies: Replies) -> None:
        if not callable(replies) and not replies:
            raise ValueError("give at least one FakeReply")
        self._replies = replies
        self._next = 0

    def take(self, body: Any) -> FakeReply:
        if callable(self._replies):
            return self._replies(body)
        reply = self._replies[min(self._next, len(self._replies) - 1)]
        self._next += 1
        return reply


def _pieces(text: str, chunk_chars: int | None) -> list[str]:
    if not text:
        return []
    if chunk_chars:
        return [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    return re.findall(r"\S+\s*|\s+", text)


async def _record(request: Request, recorder: RequestRecorder | None) -> Any:
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode("utf-8", "replace")
    if recorder is not None:
        recorder.requests.append(
            RecordedRequest(request.method, request.url.path, dict(request.headers), body)
        )
    return body


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def _paced(items: Sequence[bytes], interval: float) -> AsyncIterator[bytes]:
    for index, item in enumerate(items):
        if interval and index:
            await anyio.sleep(interval)
        yield item


# --------------------------------------------------------------------------- OpenAI


def openai_app(replies: Replies, recorder: RequestRecorder | None = None) -> Starlette:
    """The fake chat-completions app (mount it at the root; routes start with ``/v1``)."""
    queue = _ReplyQueue(replies)

    async def completions(request: Request) -> Response:
        body = await _record(request, recorder)
        reply = queue.take(body)
        if reply.status != 200:
            error = {"message": reply.error, "type": "error", "param": None, "code": None}
            return JSONResponse({"error": error}, reply.status, reply.error_headers())
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        if isinstance(body, dict) and body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _openai_chunks(reply, model, include_usage=include_usage)
            return StreamingResponse(_paced(chunks, reply.interval), media_type="text/event-stream")
        return JSONResponse(_openai_completion(reply, model))

    async def models(request: Request) -> Response:
        await _record(request, recorder)
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
        return _sse(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": p}) for p in _pieces(reply.reasoning, reply.chunk_chars)]
    out += [chunk({"content": p}) for p in _pieces(reply.text, reply.chunk_chars)]
    for index, call in enumerate(reply.tool_calls):
        head = {"index": index, "id": call.id, "type": "function"}
        out.append(
            chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        )
        for piece in _pieces(call.arguments_json, call.chunk_chars):
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
        out.append(_sse(usage))
    out.append(b"data: [DONE]\n\n")
    return out


# --------------------------------------------------------------------------- Anthropic

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
    queue = _ReplyQueue(replies)

    async def messages(request: Request) -> Response:
        body = await _record(request, recorder)
        reply = queue.take(body)
        if reply.status != 200:
            kind = _ANTHROPIC_ERROR_TYPES.get(reply.status, "api_error")
            error = {"type": "error", "error": {"type": kind, "message": reply.error}}
            return JSONResponse(error, reply.status, reply.error_headers())
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        if isinstance(body, dict) and body.get("stream"):
            events = _anthropic_events(reply, model)
            return StreamingResponse(_paced(events, reply.interval), media_type="text/event-stream")
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
    out = [_sse({"type": "message_start", "message": start}, "message_start")]
    index = 0

    def block(head: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": head},
                "content_block_start",
            )
        )
        for delta in deltas:
            out.append(
                _sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1

    if reply.reasoning:
        thinking = [
            {"type": "thinking_delta", "thinking": p}
            for p in _pieces(reply.reasoning, reply.chunk_chars)
        ]
        thinking.append({"type": "signature_delta", "signature": "fake-sig"})
        block({"type": "thinking", "thinking": "", "signature": ""}, thinking)
    if reply.text:
        out.append(_sse({"type": "ping"}, "ping"))
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": p} for p in _pieces(reply.text, reply.chunk_chars)],
        )
    for call in reply.tool_calls:
        block(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
            [
                {"type": "input_json_delta", "partial_json": p}
                for p in _pieces(call.arguments_json, call.chunk_chars)
            ],
        )
    out.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": _anthropic_stop(reply), "stop_sequence": None},
                "usage": {"output_tokens": reply.usage_output_tokens},
            },
            "message_delta",
        )
    )
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


# --------------------------------------------------------------------------- serving


class _Server(uvicorn.Server):
    """A uvicorn server that leaves the process's signal handlers alone."""

    @contextmanager
    def capture_signals(self) -> Any:
        yield


def _loopback_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def serve_app(app: Any, *, port: int = 0) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1 in a child task; yields ``http://127.0.0.1:PORT``.

    The socket is bound and listening before the server task starts, so the URL is usable at
    once (early connections wait in the backlog). Leaving the block stops the server.
    """
    sock = _loopback_socket(port)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
    )
    server = _Server(config)
    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(server.serve, [sock])
            try:
                yield f"http://127.0.0.1:{bound_port}"
            finally:
                server.should_exit = True
    except BaseExceptionGroup as group:
        # Let an error raised in the caller's block (or by the server) surface bare, so that
        # `pytest.raises(ModelHTTPError)` around the block works.
        if len(group.exceptions) != 1:
            raise
        raise group.exceptions[0]  # noqa: B904 - the group is only anyio's wrapper


@asynccontextmanager
async def fake_openai_server(
    replies: Replies, *, recorder: RequestRecorder | None = None, port: int = 0
) -> AsyncIterator[str]:
    """A fake OpenAI server; yields the client's ``base_url`` (ending in ``/v1``)."""
    async with serve_app(openai_app(replies, recorder), port=port) as root:
        yield f"{root}/v1"


@asynccontextmanager
async def fake_anthropic_server(
    replies: Replies, *, recorder: RequestRecorder | None = None, port: int = 0
) -> AsyncIterator[str]:
    """A fake Anthropic server; yields the client's ``base_url`` (the server root)."""
    async with serve_app(anthropic_app(replies, recorder), port=port) as root:
        yield root


def main(argv: Sequence[str] | None = None) -> None:
    """Run a fake upstream until interrupted (``python -m drupe.testing.fake_providers``)."""
    parser = argparse.ArgumentParser(description="Run a fake OpenAI or Anthropic server.")
    parser.add_argument("kind", choices=["openai", "anthropic"])
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--words", type=int, default=50, help="words in every answer")
    parser.add_argument("--interval", type=float, default=0.0, help="seconds between deltas")
    args = parser.parse_args(argv)
    text = " ".join(f"word{i}" for i in range(args.words))
    reply = FakeReply(text=text, interval=args.interval)
    kind: Literal["openai", "anthropic"] = args.kind
    app = openai_app([reply]) if kind == "openai" else anthropic_app([reply])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
