"""``GET /api/conversations/{id}/trace``: a conversation's stored spans, for the trace timeline.

The answer is ``{conversationId, traceId, spans}``; spans come from the local trace store
(``<data dir>/traces``), oldest first, each as ``drupe.observability.trace_store.span_json``
shapes them (``start``/``end`` in epoch nanoseconds). An unknown conversation is a 404; a
conversation with tracing off or nothing flushed yet has ``spans: []``.
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Request

from drupe.http.state import get_caller, get_runtime
from drupe.observability.turn_spans import trace_id_for

__all__ = ["router"]

router = APIRouter(tags=["traces"])


@router.get("/api/conversations/{conversation_id}/trace")
async def conversation_trace(conversation_id: str, request: Request) -> dict[str, Any]:
    runtime = get_runtime(request)
    await runtime.conversations.check(get_caller(request), conversation_id, "read")
    row = await runtime.db.conversations.get(conversation_id)
    trace_id = (row.trace_id if row is not None else None) or trace_id_for(conversation_id)
    if runtime.traces is not None:
        await runtime.traces.idle()  # flushes queued by finished turns are written first
    store = runtime.traces.store if runtime.traces is not None else None
    spans = await anyio.to_thread.run_sync(store.read, conversation_id) if store else []
    return {"conversationId": conversation_id, "traceId": trace_id, "spans": spans}
