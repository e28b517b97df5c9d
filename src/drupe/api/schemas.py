"""Request bodies of the browser API (pydantic), and the JSON shapes of its answers.

The chat body is the AI SDK ``DefaultChatTransport`` body (``{id, messages, trigger,
messageId}``) plus Drupe's options (``models``, ``strategy``); unknown keys are accepted, as the
transport lets clients add their own. Messages are AI SDK ``UIMessage`` JSON; parts stay plain
dicts (the provider checks them). Answers are built by the ``*_json`` functions so every route
spells a conversation or a message the same way (camelCase, ISO-8601 times).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from drupe.persistence.records import ConversationRecord, MessageRecord

__all__ = [
    "CONVERSATION_ID_PATTERN",
    "ApprovalDecisionIn",
    "ApprovalsRequest",
    "ChatRequest",
    "CreateConversation",
    "RenameConversation",
    "UIMessageIn",
    "conversation_json",
    "message_json",
]

CONVERSATION_ID_PATTERN = r"^[A-Za-z0-9_\-:.]{1,128}$"
"""1-128 characters of letters, digits, ``_ - : .``."""


class UIMessageIn(BaseModel):
    """An AI SDK ``UIMessage`` as the client holds it."""

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(default=None, max_length=256)
    role: Literal["user", "assistant", "system"]
    parts: list[dict[str, Any]] = Field(max_length=1000)
    metadata: Any = None


class ChatRequest(BaseModel):
    """``POST /api/chat``: the ``DefaultChatTransport`` body plus Drupe's options."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=CONVERSATION_ID_PATTERN, description="The conversation id.")
    messages: list[UIMessageIn] = Field(
        default_factory=list,
        max_length=10_000,
        description="The client's messages; only the last user message is read.",
    )
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = Field(default=None, max_length=256)
    parentId: str | None = Field(
        default=None,
        max_length=256,
        description=(
            "Submit only: the message the new user message follows (edit and resend: the edited "
            "message's parent, which starts a new branch); default: the newest message."
        ),
    )
    newRoot: bool = Field(
        default=False,
        description=(
            "Submit only: the new user message has no parent, a sibling of the conversation's "
            "first message (editing the first message starts a new branch); not with parentId."
        ),
    )
    models: list[str] | None = Field(
        default=None, max_length=64, description="Model ids; several make a multi-model turn."
    )
    strategy: Literal["enqueue", "interrupt", "reject", "rollback"] = Field(
        default="enqueue", description="What a submit to a live conversation does."
    )
    background: bool = Field(
        default=False,
        description=(
            "Run the turn with no connection attached: the answer is 202 with a run "
            "(GET /api/runs/{id}); watch it over GET /api/chat/{id}/stream."
        ),
    )


class ApprovalDecisionIn(BaseModel):
    approvalId: str = Field(min_length=1, max_length=256)
    approved: bool
    reason: str | None = Field(default=None, max_length=10_000)


class ApprovalsRequest(BaseModel):
    decisions: list[ApprovalDecisionIn] = Field(min_length=1, max_length=256)


class CreateConversation(BaseModel):
    title: str | None = Field(default=None, max_length=500)
    ephemeral: bool = False


class RenameConversation(BaseModel):
    title: str | None = Field(max_length=500)


def conversation_json(record: ConversationRecord, status: str) -> dict[str, Any]:
    return {
        "id": record.id,
        "title": record.title,
        "status": status,
        "updatedAt": record.updated_at.isoformat(),
        "ownerId": record.owner_id,
    }


def message_json(row: MessageRecord) -> dict[str, Any]:
    return {
        "id": row.id,
        "parentId": row.parent_id,
        "role": row.role,
        "parts": row.parts,
        "status": row.status,
        "modelId": row.model_id,
        "siblingsGroupId": row.siblings_group_id,
        "createdAt": row.created_at.isoformat(),
        "metadata": dict(row.metadata) if row.metadata is not None else None,
    }
