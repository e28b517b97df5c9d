"""A minimal SSE reader for tests: parses events (``id``, ``data``) from a byte stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson


@dataclass(frozen=True)
class Event:
    id: str | None
    data: str

    @property
    def json(self) -> Any:
        return orjson.loads(self.data)


def parse_events(text: str) -> list[Event]:
    """Every complete event in ``text`` (comments skipped)."""
    events: list[Event] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        event_id: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            events.append(Event(event_id, "\n".join(data)))
    return events


async def iter_events(response: httpx.Response) -> AsyncIterator[Event]:
    """Events as they arrive on a streaming response."""
    buffer = ""
    async for text in response.aiter_text():
        buffer += text
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            for event in parse_events(block + "\n\n"):
                yield event


def chunks(events: list[Event]) -> list[dict[str, Any]]:
    """The UI chunks of a list of events (``[DONE]`` dropped)."""
    return [e.json for e in events if e.data != "[DONE]"]


def user_message(text: str, message_id: str = "m1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def chat_body(
    conversation_id: str, text: str, message_id: str = "m1", **extra: Any
) -> dict[str, Any]:
    return {
        "id": conversation_id,
        "messages": [user_message(text, message_id)],
        "trigger": "submit-message",
        **extra,
    }
