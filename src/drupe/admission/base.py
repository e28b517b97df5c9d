"""Dispatch requests, the prepared turn, and the context provider and runner protocols.

A context provider validates a request and, for a start, writes the user row and one
``pending`` placeholder per model in one transaction, then returns a ``PreparedDispatch``. It
never calls ``StreamManager.send`` itself. A validation error raises before anything is written.

The runner is the seam to the model: ``runner(spec)`` returns the UI chunks of one execution.
The composition root plugs in the agent loop; tests may plug in a scripted one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from drupe.chunks.types import Chunk, UIMessage
from drupe.streaming.contracts import ExecutionSpec
from drupe.streaming.listeners.base import Listener
from drupe.streaming.steering import PendingSteer

__all__ = [
    "ALL_STRATEGIES",
    "ApprovalDecision",
    "ContextProvider",
    "ContinueConversation",
    "DispatchRequest",
    "PreparedDispatch",
    "Regenerate",
    "Runner",
    "SteerContinuation",
    "Strategy",
    "Submit",
    "TurnSpec",
]

Strategy = Literal["enqueue", "interrupt", "reject", "rollback"]
"""What a submit does to a live conversation (LangGraph's double-texting vocabulary)."""
ALL_STRATEGIES: frozenset[Strategy] = frozenset(("enqueue", "interrupt", "reject", "rollback"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Submit:
    """A new user message (``trigger = submit-message``)."""

    conversation_id: str
    parts: Sequence[dict[str, Any]]
    parent_id: str | None = None
    """Parent of the user row; None means the conversation's newest message (or, with
    ``new_root``, no parent)."""
    new_root: bool = False
    """The user row starts a new root of the tree, a sibling of the first message (editing a
    conversation's first message); only with ``parent_id`` None."""
    model_ids: Sequence[str] = ()
    """Empty means the default model; several means a multi-model turn."""
    strategy: Strategy = "enqueue"
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Regenerate:
    """Answer an existing user message again (``trigger = regenerate-message``)."""

    conversation_id: str
    user_message_id: str
    model_ids: Sequence[str] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    approval_id: str
    approved: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContinueConversation:
    """Resume an assistant row whose approvals were all decided (same row, same model)."""

    conversation_id: str
    anchor_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerContinuation:
    """Answer a queued steer row (a new placeholder under it, the model stamped on it)."""

    conversation_id: str
    steer: PendingSteer


DispatchRequest = Submit | Regenerate | ContinueConversation | SteerContinuation


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnSpec:
    """What the runner needs to produce one execution's chunks."""

    conversation_id: str
    message_id: str
    """The placeholder id: the first ``start`` chunk carries it as ``messageId``."""
    model_id: str
    messages: Sequence[UIMessage]
    """History root -> last; the last is the user message, or the assistant seed to continue."""
    is_steer: bool = False
    """The model-facing copy of the last user message is wrapped as a steer reminder."""
    steer_pending: Callable[[], bool] | None = None


class Runner(Protocol):
    """Produces the UI chunks of one execution. Cancellation is the abort."""

    def __call__(self, spec: TurnSpec) -> AsyncIterator[Chunk]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedDispatch:
    conversation_id: str
    executions: Sequence[ExecutionSpec] = ()
    listeners: Sequence[Listener] = ()
    user_message_id: str | None = None
    placeholder_ids: Sequence[str] = ()
    pending_steer: PendingSteer | None = None
    siblings_group_id: int | None = None
    persistent: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


class ContextProvider(Protocol):
    """Prepares turns for the conversations it handles (providers are mutually exclusive).

    Capabilities are stated, never probed: ``strategies`` lists the double-texting strategies
    the provider honours while a turn is live (the dispatcher refuses any other one before any
    side effect), and ``rollback`` is only called when ``"rollback"`` is among them.
    """

    strategies: frozenset[Strategy]

    async def can_handle(self, conversation_id: str) -> bool:
        """Whether this provider owns ``conversation_id``. Cheap; never writes."""
        ...

    def busy(self, conversation_id: str) -> bool:
        """Whether the conversation is busy although no stream is live (a queued or starting
        turn): a ``reject`` submit is refused then. Cheap; never writes."""
        ...

    async def check(self, request: Submit) -> None:
        """Validate a submit as ``prepare`` would, without writing anything or touching the
        live turn (the dispatcher calls it before a strategy stops the running answer)."""
        ...

    async def rollback(self, conversation_id: str, placeholder_ids: Sequence[str]) -> str | None:
        """Delete a stopped turn's answer rows; return its user row id (``rollback`` only)."""
        ...

    async def prepare(
        self,
        request: DispatchRequest,
        subscribers: Sequence[Listener],
        *,
        has_live_stream: bool,
    ) -> PreparedDispatch:
        """Validate, write rows, build listeners and executions. Raises before any write."""
        ...
