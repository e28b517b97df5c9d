"""Reading an AG-UI SSE body into its events (tests only)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx


def parse(body: str) -> list[dict[str, Any]]:
    events = []
    for frame in body.split("\n\n"):
        data = [line[5:].strip() for line in frame.splitlines() if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


async def events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    buffer = ""
    async for text in response.aiter_text():
        buffer += text
        while "\n\n" in buffer:
            frame, buffer = buffer.split("\n\n", 1)
            for event in parse(frame + "\n\n"):
                yield event


def run_input(thread: str, text: str, run: str = "run-1", **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **extra,
    }


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def target(model_or_agent: str) -> str:
    """The run URL path of a target (a model id's ``?`` and ``&`` percent-encoded)."""
    return "/ag-ui/" + quote(model_or_agent, safe=":")
