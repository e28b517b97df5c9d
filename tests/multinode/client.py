"""Small HTTP helpers for the multi-node tests (any node's URL or the balancer's).

``chat(url, conversation, text)`` runs one turn over ``POST /api/chat`` and reads the SSE stream
to ``[DONE]``, returning the chunks; ``text_of(message)`` joins a stored message's text parts.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

__all__ = ["chat", "text_of"]


def chat(url: str, conversation: str, text: str) -> list[dict[str, Any]]:
    """One turn over ``POST /api/chat``, read to ``[DONE]``; the chunks."""
    body = {
        "id": conversation,
        "messages": [
            {"id": f"u-{text}", "role": "user", "parts": [{"type": "text", "text": text}]}
        ],
    }
    chunks: list[dict[str, Any]] = []
    with httpx.stream("POST", f"{url}/api/chat", json=body, timeout=30) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line.removeprefix("data: ")))
    return chunks


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")
