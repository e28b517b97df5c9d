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

For Anthropic the yielded URL is the server root (the SDK appends ``/v1/messages``). The
replies and recorder are ``drupe.testing.fake_replies`` (re-exported here), the two wire formats
``drupe.testing.fake_openai`` and ``drupe.testing.fake_anthropic``, the server
``drupe.testing.loopback`` (``serve_app``, re-exported here too). This module binds loopback
only and never contacts anything else. ``python -m drupe.testing.fake_providers`` runs one as a
standalone fake upstream (for benchmarks).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Literal

import uvicorn

from drupe.testing.fake_anthropic import anthropic_app
from drupe.testing.fake_openai import openai_app
from drupe.testing.fake_replies import (
    FakeReply,
    FakeToolCall,
    RecordedRequest,
    Replies,
    RequestRecorder,
)
from drupe.testing.loopback import serve_app

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
