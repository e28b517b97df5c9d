"""``TurnRequest``: everything the agent loop needs to answer one execution of a turn.

Contract: a frozen value built by the stream manager (or a driver) and handed to
``AgentRunner.stream``. The loop never mutates it, and never mutates the UI messages it carries:
the model-facing copy (for example the steer-wrapped last user message) is built by
``drupe.agent.convert``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drupe.agent.hooks import Hooks
from drupe.agent.retry_policy import RetryPolicy
from drupe.chunks.types import Chunk, UIMessage
from drupe.tools.base import ToolEntry

__all__ = ["ApprovalAsk", "RetryPolicy", "TurnRequest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAsk:
    """An approval-gated call waiting for an in-place decision (``TurnRequest.approve``)."""

    approval_id: str
    tool_call_id: str
    tool_name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    """One execution of a turn: which model answers which history with which tools."""

    conversation_id: str
    message_id: str
    """The placeholder id: the first ``start`` chunk carries ``messageId=message_id``."""
    model_id: str
    """``provider:model``, resolved by the runner's ``resolve_model``."""
    messages: Sequence[UIMessage]
    """History as AI SDK UI messages, root first. The last one is the user message, or the
    assistant seed of an approval continuation (same id as ``message_id``)."""
    system: str | None = None
    tools: Sequence[ToolEntry] = ()
    max_tool_calls: int = 20
    """Tool calls allowed in the turn; reaching it is ``tool_call_limit_reached``, an error."""
    max_steps: int = 50
    """Model requests allowed in the turn; a tool step at the cap is ``step_limit_reached``."""
    steer_pending: Callable[[], bool] | None = None
    """steer_yield: when it returns true after a completed step, the turn stops cleanly."""
    wrap_last_user_as_steer: bool = False
    """Wrap the model-facing copy of the last user message in a steer system reminder."""
    hooks: Sequence[Hooks] = ()
    """Feature hooks; they run after the runner's internal observers."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    model_settings: Mapping[str, Any] | None = None
    inject: Callable[[], Sequence[UIMessage]] | None = None
    """Mid-turn injection (agent-session steering): polled after every completed step that
    continues the turn, right before the next model request. The user messages it returns join
    the model history (their text wrapped as steer reminders); the loop emits no chunk for them."""
    approve: Callable[[ApprovalAsk], Awaitable[tuple[bool, str | None]]] | None = None
    """In-place approvals (agent sessions): an approval-gated call emits
    ``tool-approval-request``, then the loop awaits ``(approved, reason)``; approved runs the
    call, denied emits ``tool-output-denied``, and the turn goes on. ``None``: the turn ends."""
    progress: Callable[[Chunk], None] | None = None
    """Live tool progress: while a tool runs, each snapshot it reports
    (``ToolContext.progress``) is handed over at once as a preliminary ``tool-output-available``
    chunk. It comes outside the generator (the loop yields nothing while a step's tools run), so
    the consumer puts it into the stream itself, in between the chunks it iterates: it always
    falls after the call's input chunks and before its final output. ``None``: dropped."""
