"""``Dispatcher``: the only caller of ``StreamManager.send`` for user traffic (reference §4.1).

Order, all under the conversation's admission lock: wait for boot reconciliation (before the
lock) -> own the conversation (``Ownership.hold``: a no-op in one process, the node's lease in
cluster mode, where another node's lease raises ``NotOwnerError`` before anything is written)
-> wait for any in-flight terminal dispatch of the conversation -> pick the first provider
that handles the conversation -> apply the double-texting strategy when the conversation is
live -> ``prepare`` (validation, then the row writes) -> queue a steer if one was prepared ->
``send``. A validation error raises before anything is written.

``reject`` also refuses a conversation its provider calls busy while no stream is live (an agent
session with a queued or starting turn: ``ContextProvider.busy``); a scheduled task's "skip when
busy" is this strategy. Strategies for a submit to a live conversation: ``enqueue`` (a steer,
answered after the running turn), ``reject`` (``AdmissionError("busy")``, nothing stored),
``interrupt`` (stop the running turn, persist its partial ``paused``, answer the new message),
``rollback`` (stop it, delete its answer rows, answer again with both user messages). Every
refusal happens before any side effect: a strategy the provider does not state
(``ContextProvider.strategies``) is refused (``unsupported``; ``live`` for ``enqueue``), and the
provider's ``check`` validates the request, before a strategy stops the running answer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import anyio

from drupe.admission.base import (
    ContextProvider,
    DispatchRequest,
    PreparedDispatch,
    SteerContinuation,
    Submit,
)
from drupe.admission.ownership import LocalOwnership, Ownership
from drupe.errors import AdmissionError
from drupe.streaming.listeners.base import Listener
from drupe.streaming.manager import SendInput, StreamManager
from drupe.streaming.steering import EnqueueDecision, PendingSteer

__all__ = ["DispatchResult", "Dispatcher"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchResult:
    mode: Literal["started", "injected"]
    conversation_id: str
    turn_id: str | None
    user_message_id: str | None
    placeholder_ids: tuple[str, ...]
    execution_ids: tuple[str, ...]
    steer: EnqueueDecision | None = None


class Dispatcher:
    """Admits turns: providers prepare them, the manager runs them."""

    def __init__(
        self,
        manager: StreamManager,
        providers: Sequence[ContextProvider],
        *,
        reconciled: anyio.Event | None = None,
        ownership: Ownership | None = None,
    ) -> None:
        if not providers:
            raise ValueError("at least one context provider is needed")
        self.ownership: Ownership = ownership or LocalOwnership()
        self.manager = manager
        self.providers = list(providers)
        self.reconciled = reconciled
        manager.set_steer_launcher(self._launch_steer)

    async def dispatch(
        self, request: DispatchRequest, subscribers: Sequence[Listener] = ()
    ) -> DispatchResult:
        """Admit ``request``; ``subscribers`` are attached to the turn's stream."""
        if self.reconciled is not None:
            await self.reconciled.wait()
        async with (
            self.ownership.hold(request.conversation_id),
            self.manager.conversation_lock(request.conversation_id),
        ):
            return await self.dispatch_locked(request, subscribers)

    async def dispatch_locked(
        self, request: DispatchRequest, subscribers: Sequence[Listener] = ()
    ) -> DispatchResult:
        """``dispatch`` for callers that already hold the conversation lock."""
        conversation_id = request.conversation_id
        await self.manager.wait_terminal_idle(conversation_id)
        provider = await self._provider_for(conversation_id)
        live = self.manager.is_live(conversation_id)
        if (
            not live
            and isinstance(request, Submit)
            and request.strategy == "reject"
            and provider.busy(conversation_id)
        ):
            raise AdmissionError(
                "busy", f"conversation {conversation_id!r} is busy (a turn is queued or starting)"
            )
        if live and isinstance(request, Submit):
            await self._admissible(provider, request)  # refusals happen before any side effect
            if request.strategy != "enqueue":
                request = await self._apply_strategy(provider, request)
                live = self.manager.is_live(conversation_id)
        prepared = await provider.prepare(request, subscribers, has_live_stream=live)
        return self._send(prepared)

    def _send(self, prepared: PreparedDispatch) -> DispatchResult:
        steer: EnqueueDecision | None = None
        if prepared.pending_steer is not None:
            steer = self.manager.steers.enqueue(prepared.conversation_id, prepared.pending_steer)
        result = self.manager.send(
            SendInput(
                conversation_id=prepared.conversation_id,
                executions=prepared.executions,
                listeners=prepared.listeners,
                siblings_group_id=prepared.siblings_group_id,
                persistent=prepared.persistent,
            )
        )
        if result.mode == "started" and len(result.execution_ids) != len(prepared.executions):
            raise AssertionError("the manager started fewer executions than were prepared")
        return DispatchResult(
            mode=result.mode,
            conversation_id=prepared.conversation_id,
            turn_id=result.turn_id,
            user_message_id=prepared.user_message_id,
            placeholder_ids=tuple(prepared.placeholder_ids),
            execution_ids=result.execution_ids,
            steer=steer,
        )

    async def _provider_for(self, conversation_id: str) -> ContextProvider:
        for provider in self.providers:
            if await provider.can_handle(conversation_id):
                return provider
        raise AdmissionError("unsupported", f"no provider handles {conversation_id!r}")

    async def _admissible(self, provider: ContextProvider, request: Submit) -> None:
        """Refuse a submit to a live conversation before anything changes.

        The strategy must be one the provider states, and the request must pass the provider's
        validation: a refused submit leaves the running answer untouched.
        """
        conversation_id = request.conversation_id
        strategy = request.strategy
        if strategy == "reject":
            raise AdmissionError(
                "busy",
                f"conversation {conversation_id!r} is answering; "
                "retry later or send with strategy 'enqueue' or 'interrupt'",
            )
        if strategy not in provider.strategies:
            supported = ", ".join(sorted(provider.strategies - {"reject"})) or "none"
            raise AdmissionError(
                "live" if strategy == "enqueue" else "unsupported",
                f"conversation {conversation_id!r} is answering and does not support strategy "
                f"{strategy!r} (supported: {supported}); send again when it is done",
            )
        await provider.check(request)

    async def _apply_strategy(self, provider: ContextProvider, request: Submit) -> Submit:
        conversation_id = request.conversation_id
        stream = self.manager.get(conversation_id)
        placeholders = [
            e.anchor_message_id
            for e in (stream.executions.values() if stream is not None else ())
            if e.anchor_message_id is not None
        ]
        self.manager.abort(conversation_id, f"double-text-{request.strategy}")
        await self.manager.wait_settled(conversation_id)
        if request.strategy == "rollback":
            user_row = await provider.rollback(conversation_id, placeholders)
            return replace(request, parent_id=user_row or request.parent_id)
        return request

    async def _launch_steer(
        self, conversation_id: str, steer: PendingSteer, carried: Sequence[Listener]
    ) -> None:
        # Called by the manager under the conversation lock (see StreamManager).
        await self.dispatch_locked(
            SteerContinuation(conversation_id=conversation_id, steer=steer), carried
        )
