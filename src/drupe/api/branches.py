"""Which branch of a conversation's tree is shown, kept on the server.

``PUT /api/conversations/{id}/branch`` with ``{"messageId": ...}`` shows the branch through
that message: from it, down to its newest leaf (at each step the most recently created child).
The choice is stored in the conversation's metadata as ``branch = {leaf, newest}``, where
``newest`` is the conversation's newest message when the choice was made; ``shown_leaf`` honours
the choice only while no newer message exists, so a new turn (which always extends the branch
it is sent on) shows its own branch again. ``GET /api/conversations/{id}`` answers
``branchLeafId`` (``None``: the newest message's branch, the default).

A message of another conversation, or an unknown one, is a 404; an ephemeral conversation
(one branch only) is a 422.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from drupe.errors import NotFoundError, ValidationError
from drupe.http.state import get_caller, get_runtime
from drupe.persistence.records import MessageRecord

__all__ = ["BRANCH_KEY", "newest_leaf_under", "router", "shown_leaf"]

router = APIRouter(tags=["conversations"])

BRANCH_KEY = "branch"


class BranchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messageId: str = Field(min_length=1, max_length=256)


def newest_leaf_under(messages: Sequence[MessageRecord], start: str) -> str:
    """The leaf reached from ``start`` by always taking the most recently created child."""
    children: dict[str, list[MessageRecord]] = {}
    for message in messages:  # creation order
        if message.parent_id is not None:
            children.setdefault(message.parent_id, []).append(message)
    node, seen = start, {start}
    while children.get(node):
        node = children[node][-1].id
        if node in seen:  # a cycle cannot be stored, but never loop
            break
        seen.add(node)
    return node


def shown_leaf(metadata: Mapping[str, Any], newest_id: str | None) -> str | None:
    """The chosen leaf, if the choice still holds (no message created since it was made)."""
    choice = metadata.get(BRANCH_KEY)
    if not isinstance(choice, Mapping) or newest_id is None:
        return None
    leaf, newest = choice.get("leaf"), choice.get("newest")
    return leaf if isinstance(leaf, str) and newest == newest_id else None


@router.put("/api/conversations/{conversation_id}/branch")
async def choose_branch(conversation_id: str, body: BranchIn, request: Request) -> dict[str, Any]:
    """Show the branch through ``messageId`` (down to its newest leaf)."""
    runtime = get_runtime(request)
    caller = get_caller(request)
    await runtime.conversations.check(caller, conversation_id, "write")
    record = await runtime.conversations.get(caller, conversation_id)
    if record is None:
        raise ValidationError("an ephemeral conversation has one branch")
    rows = await runtime.conversations.messages(caller, conversation_id)
    if not any(row.id == body.messageId for row in rows):
        raise NotFoundError("message", body.messageId)
    leaf = newest_leaf_under(rows, body.messageId)
    await runtime.db.conversations.set_metadata_key(
        conversation_id, BRANCH_KEY, {"leaf": leaf, "newest": rows[-1].id}
    )
    return {"leafId": leaf}
