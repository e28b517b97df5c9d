"""``GET /api/limits``: the caps the web UI states and checks before it sends.

``maxAttachmentBytes`` is how many bytes of files one message may carry in all: files travel
as base64 ``data:`` URLs inside the JSON body of ``POST /api/chat``, so it is three quarters
of ``maxBodyBytes`` after ``ATTACHMENT_HEADROOM`` bytes kept for the text and the envelope.
The server enforces only ``maxBodyBytes`` (413); the UI refuses larger files before sending.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Request

from drupe.http.state import get_runtime

__all__ = ["ATTACHMENT_HEADROOM", "attachment_budget", "router"]

router = APIRouter(tags=["system"])

ATTACHMENT_HEADROOM: Final = 64 * 1024


def attachment_budget(max_body_bytes: int) -> int:
    """The file bytes that fit one request body once base64-encoded (never negative)."""
    return max(0, (max_body_bytes - ATTACHMENT_HEADROOM) * 3 // 4)


@router.get("/api/limits")
async def limits(request: Request) -> dict[str, Any]:
    """The request caps, and the attachment budget derived from them."""
    caps = get_runtime(request).settings.limits
    return {
        "maxBodyBytes": caps.max_body_bytes,
        "maxAttachmentBytes": attachment_budget(caps.max_body_bytes),
        "maxMessageChars": caps.max_message_chars,
    }
