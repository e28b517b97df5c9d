"""Conversation REST routes and the multiplexed event stream.

* ``GET/POST /api/conversations``, ``GET/PATCH/DELETE /api/conversations/{id}``. The listing is
  newest-updated first, ``limit`` capped by ``Limits.max_page_size``, paged by the opaque
  ``nextCursor`` (pass it back as ``before``). Delete stops a live answer first (its partial is
  persisted, then deleted with the rest).
* ``GET /api/conversations/{id}/events``: every execution of every turn of the conversation
  and its status changes, as SSE (``MultiplexListener``), resumable by ``Last-Event-ID``. The
  response follows the conversation across turns (a status observer attaches it to each new
  stream) until the client disconnects; the observer is removed when the response ends. In
  cluster mode the status changes of a stream on another node arrive too (the board's remote
  observers); relaying that stream's chunks is the chunk log's part.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Header, Query, Request, Response

from drupe.api.branches import shown_leaf
from drupe.api.schemas import (
    CreateConversation,
    RenameConversation,
    conversation_json,
    message_json,
)
from drupe.http.sse_response import SseResponse
from drupe.http.state import get_board, get_caller, get_runtime
from drupe.streaming.listeners.sse import MultiplexListener

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["router"]

router = APIRouter(tags=["conversations"])
_listener_ids = itertools.count(1)


def _ephemeral_json(runtime: Runtime, conversation_id: str, status: str) -> dict[str, Any]:
    conversation = runtime.ephemeral.get(conversation_id)
    assert conversation is not None
    messages = []
    parent: str | None = None
    for row in conversation.rows:
        messages.append(
            {
                "id": row.message["id"],
                "parentId": parent,
                "role": row.message["role"],
                "parts": row.message.get("parts", []),
                "status": row.status,
                "modelId": row.model_id,
                "siblingsGroupId": None,
                "createdAt": None,
                "metadata": row.message.get("metadata"),
            }
        )
        parent = row.message["id"]
    return {
        "id": conversation_id,
        "title": conversation.title,
        "status": status,
        "ephemeral": True,
        "messages": messages,
    }


@router.get("/api/conversations")
async def list_conversations(
    request: Request,
    limit: int = Query(default=50, ge=1, description="Capped by the server's page size."),
    before: str | None = Query(default=None, max_length=512),
) -> dict[str, Any]:
    """Conversations, newest-updated first, with their live status."""
    runtime = get_runtime(request)
    board = get_board(request)
    limit = min(limit, runtime.settings.limits.max_page_size)
    records = await runtime.conversations.list_for(get_caller(request), limit=limit, before=before)
    items = [conversation_json(r, board.status(r.id)) for r in records]
    next_cursor = records[-1].cursor if len(records) == limit else None
    return {"items": items, "nextCursor": next_cursor}


@router.post("/api/conversations", status_code=201)
async def create_conversation(body: CreateConversation, request: Request) -> dict[str, Any]:
    """Create a conversation (``ephemeral``: kept in memory only, never written)."""
    runtime = get_runtime(request)
    if body.ephemeral:
        conversation_id = runtime.ephemeral.create(title=body.title)
        return {
            "id": conversation_id,
            "title": body.title,
            "status": "idle",
            "updatedAt": None,
            "ephemeral": True,
        }
    record = await runtime.conversations.create(get_caller(request), title=body.title)
    return conversation_json(record, "idle")


@router.get("/api/conversations/{conversation_id}")
async def get_conversation(conversation_id: str, request: Request) -> dict[str, Any]:
    """A conversation with every message of its tree (oldest first)."""
    runtime = get_runtime(request)
    caller = get_caller(request)
    status = get_board(request).status(conversation_id)
    record = await runtime.conversations.get(caller, conversation_id)
    if record is None:  # ephemeral: in memory only
        return _ephemeral_json(runtime, conversation_id, status)
    rows = await runtime.conversations.messages(caller, conversation_id)
    return {
        **conversation_json(record, status),
        "messages": [message_json(r) for r in rows],
        "branchLeafId": shown_leaf(record.metadata, rows[-1].id if rows else None),
    }


@router.patch("/api/conversations/{conversation_id}")
async def rename_conversation(
    conversation_id: str, body: RenameConversation, request: Request
) -> dict[str, Any]:
    """Rename a conversation."""
    runtime = get_runtime(request)
    status = get_board(request).status(conversation_id)
    record = await runtime.conversations.rename(get_caller(request), conversation_id, body.title)
    if record is None:  # ephemeral
        return {"id": conversation_id, "title": body.title, "status": status, "updatedAt": None}
    return conversation_json(record, status)


@router.delete("/api/conversations/{conversation_id}", status_code=204, response_class=Response)
async def delete_conversation(conversation_id: str, request: Request) -> Response:
    """Stop a live answer (persisting its partial), then delete every row."""
    runtime = get_runtime(request)
    await runtime.conversations.delete(get_caller(request), conversation_id)
    get_board(request).forget(conversation_id)
    return Response(status_code=204)


@router.get(
    "/api/conversations/{conversation_id}/events",
    response_class=Response,
    responses={
        200: {"description": "Multiplexed SSE events.", "content": {"text/event-stream": {}}}
    },
)
async def conversation_events(
    conversation_id: str,
    request: Request,
    last_event_id: str | None = Header(default=None, alias="Last-Event-ID"),
) -> Response:
    """Every execution's chunks and the status changes of one conversation (SSE)."""
    runtime = get_runtime(request)
    listener = MultiplexListener(f"events:{next(_listener_ids)}")
    # The board mirrors this node's statuses and, in cluster mode, every node's.
    subscription = await runtime.conversations.watch(
        get_caller(request), conversation_id, listener, last_event_id, mirror=get_board(request)
    )

    def close() -> None:
        listener.buffer.disconnected = True
        subscription.close()

    return SseResponse(listener.buffer, on_close=close, ui_message_stream=False)
