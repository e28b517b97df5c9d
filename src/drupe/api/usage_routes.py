"""``GET /api/usage``: answers and tokens per day, per model and per conversation, and the
gateway's requests and tokens per key, user, model and dialect.

The window: ``since``..``until`` (ISO dates, inclusive; ``until`` defaults to today in UTC), or
``days`` (1..366, default 30) UTC days ending with ``until``; ``since`` after ``until``, a window
over 366 days, or both ``since`` and ``days`` is a 422 that says so. Every day of the window
is listed, zeros included, so a chart needs no gap filling; models and conversations are
ordered by total tokens, conversations capped at ``top`` (1..100, default 20;
``conversationsTotal`` says how many had answers). The numbers come from the usage the server
stores with each settled answer (``drupe.persistence.usage``); nothing is counted twice.
The ``gateway`` section counts every ``/v1`` request (``drupe.persistence.gateway_usage``, fed
by ``GatewayAccess.charge``; the meter is flushed before reading): keys are named by their
name and prefix, never their secret.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from drupe.http.state import get_caller, get_runtime
from drupe.persistence.gateway_usage import GatewayCount, GatewayUsageSummary
from drupe.persistence.usage import MAX_DAYS, UsageCount, usage_window

__all__ = ["MAX_DAYS", "router"]

router = APIRouter(tags=["usage"])
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
    days: Annotated[
        int | None, Query(ge=1, le=MAX_DAYS, description="UTC days in the window (default 30).")
    ] = None,
    until: Annotated[date | None, Query(description="Last day (ISO date; default today).")] = None,
    since: Annotated[
        date | None, Query(description="First day (ISO date; instead of days).")
    ] = None,
    top: int = Query(default=20, ge=1, le=MAX_TOP, description="Conversations listed."),
) -> dict[str, Any]:
    """Usage of the window: totals, every day, every model, the top conversations. An admin sees
    everyone's; a member their own conversations' and their own keys' (the gateway section)."""
    caller = get_caller(request)
    owner = None if caller.is_admin else caller.user_id
    runtime = get_runtime(request)
    first, last = usage_window(since, until, days, datetime.now(UTC).date())
    summary = await runtime.db.usage.summary(
        since=first, until=last, top_conversations=top, owner_id=owner
    )
    if runtime.gateway_usage is not None:
        await runtime.gateway_usage.flush()
    gateway = await runtime.db.gateway_usage.summary(since=first, until=last, owner_id=owner)
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
        "gateway": await _gateway_json(request, gateway),
    }


def _gateway_count(count: GatewayCount) -> dict[str, Any]:
    return {
        "requests": count.requests,
        "inputTokens": count.input_tokens,
        "outputTokens": count.output_tokens,
        "totalTokens": count.total_tokens,
    }


async def _gateway_json(request: Request, summary: GatewayUsageSummary) -> dict[str, Any]:
    """The gateway section: keys by name and prefix (None: requests made without a key)."""
    db = get_runtime(request).db
    keys = {record.id: record for record in await db.api_keys.list()}
    users = {user.id: user.name for user in await db.users.list_users()}

    def key_json(count: GatewayCount) -> dict[str, Any]:
        record = keys.get(count.key) if count.key is not None else None
        return {
            "keyId": count.key,
            "name": record.name if record is not None else None,
            "prefix": record.prefix if record is not None else None,
            "revoked": record.revoked_at is not None if record is not None else None,
            **_gateway_count(count),
        }

    return {
        "totals": _gateway_count(summary.totals),
        "days": [{"day": d.key, **_gateway_count(d)} for d in summary.days],
        "keys": [key_json(k) for k in summary.keys],
        "users": [
            {"userId": u.key, "name": users.get(u.key or ""), **_gateway_count(u)}
            for u in summary.users
        ],
        "models": [{"modelId": m.key, **_gateway_count(m)} for m in summary.models],
        "dialects": [{"dialect": d.key, **_gateway_count(d)} for d in summary.dialects],
    }
