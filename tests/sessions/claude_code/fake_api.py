"""A scripted fake Anthropic Messages API for the real Claude Code CLI (loopback only).

``FakeClaudeApi`` serves ``POST /v1/messages`` (the CLI always streams) from a ``script``
callable: it gets each request body and returns the ``Reply`` to stream (text, then at most one
tool call). A reply may ``hold`` before its tool call: the stream pauses (``held`` is set) until
the test sets the reply's ``release`` event, which lets a test act mid-turn (send a steer) at a
known point. Every request body is kept in ``requests``. ``POST /v1/messages/count_tokens``
answers a fixed count and is counted in ``count_tokens`` (the CLI calls it for context usage).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from drupe.testing.loopback import serve_app

__all__ = ["FakeClaudeApi", "Reply", "last_user_blocks", "tool_results_in"]


@dataclass
class Reply:
    text: str = ""
    tool: tuple[str, dict[str, Any]] | None = None
    tool_id: str = "toolu_1"
    hold: bool = False
    status: int = 200
    """Anything but 200: answer with this HTTP error (``retry-after: 0``) instead."""
    held: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)


def last_user_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the request's last message (a string becomes one text block)."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def tool_results_in(body: dict[str, Any]) -> bool:
    return any(b.get("type") == "tool_result" for b in last_user_blocks(body))


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class FakeClaudeApi:
    def __init__(self, script: Callable[[dict[str, Any]], Reply]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.count_tokens = 0
        self.url = ""

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/messages", self._messages, methods=["POST"]),
            ]
        )

    async def _count_tokens(self, request: Request) -> Response:
        self.count_tokens += 1
        return JSONResponse({"input_tokens": 42})

    async def _messages(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append(body)
        reply = self.script(body)
        if reply.status != 200:
            error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
            return Response(
                json.dumps(error),
                status_code=reply.status,
                headers={"retry-after": "0", "content-type": "application/json"},
            )
        return StreamingResponse(
            self._stream(reply, body.get("model", "fake")), media_type="text/event-stream"
        )

    async def _stream(self, reply: Reply, model: str) -> AsyncIterator[bytes]:
        n = len(self.requests)
        message = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        yield _sse("message_start", {"type": "message_start", "message": message})
        index = 0
        if reply.text:
            block = {"type": "text", "text": ""}
            yield _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
            for word in reply.text.split(" "):
                delta = {"type": "text_delta", "text": word + " "}
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        if reply.hold:
            reply.held.set()
            await reply.release.wait()
        if reply.tool is not None:
            name, tool_input = reply.tool
            block = {"type": "tool_use", "id": reply.tool_id, "name": name, "input": {}}
            yield _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
            yield _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        stop = "tool_use" if reply.tool is not None else "end_turn"
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})

    @asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        async with serve_app(self.app()) as url:
            self.url = url
            yield url
