"""The scripted replies of the fake provider servers, and the plumbing both servers share.

Owns: ``FakeReply`` / ``FakeToolCall`` (one scripted answer: text, reasoning and tool calls
whose JSON arguments stream in slices, usage, or an HTTP error with ``Retry-After``),
``RequestRecorder`` (every request a fake server received), ``ReplyQueue`` (each POST takes the
next reply; the last one repeats) and the helpers that record a request, cut text into deltas
and frame server-sent events. ``drupe.testing.fake_openai`` and ``drupe.testing.fake_anthropic``
speak the two wire formats.

Must never: contact anything (pure data and Starlette request reading).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.requests import Request

__all__ = [
    "FakeReply",
    "FakeToolCall",
    "RecordedRequest",
    "ReplyQueue",
    "Replies",
    "RequestRecorder",
    "paced",
    "pieces",
    "record",
    "sse",
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


class ReplyQueue:
    """The replies of one fake server: each request takes the next, the last one repeats (or
    a function of the request body answers)."""

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


def pieces(text: str, chunk_chars: int | None) -> list[str]:
    """``text`` as streamed deltas: one per word (with its trailing space), or fixed slices."""
    if not text:
        return []
    if chunk_chars:
        return [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    return re.findall(r"\S+\s*|\s+", text)


async def record(request: Request, recorder: RequestRecorder | None) -> Any:
    """The request's body (JSON when it parses), kept in ``recorder`` when given."""
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


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event frame of ``data`` as compact JSON."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def paced(items: Sequence[bytes], interval: float) -> AsyncIterator[bytes]:
    """``items`` with ``interval`` seconds between two of them."""
    for index, item in enumerate(items):
        if interval and index:
            await anyio.sleep(interval)
        yield item
