"""``GET /api/usage``: answers and tokens per day, per model and per conversation.

``days`` (1..366, default 30) UTC days ending with ``until`` (an ISO date, default today in
UTC). Every day of the window is listed, zeros included, so a chart needs no gap filling; models
and conversations are ordered by total tokens, conversations capped at ``top`` (1..100, default
20; ``conversationsTotal`` says how many had answers). The numbers come from the usage the
server stores with each settled answer (``drupe.persistence.usage``); nothing is counted twice.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from drupe.http.state import get_runtime, require_admin
from drupe.persistence.usage import UsageCount

__all__ = ["MAX_DAYS", "router"]

router = APIRouter(tags=["usage"])
MAX_DAYS = 366
MAX_TOP = 100


def _count_json(count: UsageCount) -> dict[str, Any]:
    return {
        "answers": count.answers,
        "errors": count.errors,
        "inputTokens": count.input_tokens,
        "outputTokens": count.output_tokens,
        "totalTokens": count.total_tokens,
    }


@router.get("/api/usage")
async def usage(
    request: Request,
    days: int = Query(default=30, ge=1, le=MAX_DAYS, description="UTC days in the window."),
    until: Annotated[date | None, Query(description="Last day (ISO date; default today).")] = None,
    top: int = Query(default=20, ge=1, le=MAX_TOP, description="Conversations listed."),
) -> dict[str, Any]:
    """Usage of the window: totals, every day, every model, the top conversations (admins)."""
    require_admin(request)
    runtime = get_runtime(request)
    last = until or datetime.now(UTC).date()
    first = last - timedelta(days=days - 1)
    summary = await runtime.db.usage.summary(since=first, until=last, top_conversations=top)
    return {
        "since": summary.since.isoformat(),
        "until": summary.until.isoformat(),
        "totals": _count_json(summary.totals),
        "days": [{"day": d.key, **_count_json(d)} for d in summary.days],
        "models": [{"modelId": m.key, **_count_json(m)} for m in summary.models],
        "conversations": [
            {"id": c.key, "title": c.title, **_count_json(c)} for c in summary.conversations
        ],
        "conversationsTotal": summary.conversations_total,
    }
