"""``GET /api/search?q=...&limit=...``: full-text search over titles and message text.

Answers ``{"items": [{conversationId, title, messageId, role, snippet, at}]}``: title matches
(``messageId`` null) first, then message matches. ``snippet`` is a list of ``{text, match}``
segments. An empty query (no words), a query over 200 characters or ``limit`` outside 1..50 is
a 422 with a message. Ephemeral conversations are never stored, so never found.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from drupe.errors import DrupeError
from drupe.http.state import get_caller, get_runtime
from drupe.persistence.search import MAX_QUERY_CHARS, MAX_SEARCH_HITS, SearchHit

__all__ = ["router"]

router = APIRouter(tags=["conversations"])


def hit_json(hit: SearchHit) -> dict[str, Any]:
    """The JSON of one search hit."""
    return {
        "conversationId": hit.conversation_id,
        "title": hit.conversation_title,
        "messageId": hit.message_id,
        "role": hit.role,
        "snippet": [{"text": text, "match": match} for text, match in hit.snippet],
        "at": hit.at.isoformat(),
    }


@router.get("/api/search")
async def search(
    request: Request,
    q: str = Query(min_length=1, max_length=MAX_QUERY_CHARS, description="Words to find."),
    limit: int = Query(default=20, ge=1, le=MAX_SEARCH_HITS),
) -> dict[str, Any]:
    """Conversations whose title, then messages whose text, contain every word of ``q``."""
    runtime = get_runtime(request)
    caller = get_caller(request)
    if caller.is_admin:
        hits = await runtime.db.search.search(q, limit=limit)
        return {"items": [hit_json(hit) for hit in hits]}
    # A member sees hits in the conversations they may read only: over-fetch, then keep those.
    wider = await runtime.db.search.search(q, limit=min(MAX_SEARCH_HITS, limit * 5))
    readable: dict[str, bool] = {}
    kept = []
    for hit in wider:
        if hit.conversation_id not in readable:
            try:
                await runtime.conversations.check(caller, hit.conversation_id, "read")
                readable[hit.conversation_id] = True
            except DrupeError:
                readable[hit.conversation_id] = False
        if readable[hit.conversation_id]:
            kept.append(hit)
    return {"items": [hit_json(hit) for hit in kept[:limit]]}
