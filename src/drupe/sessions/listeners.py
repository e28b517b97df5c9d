"""The listeners the host attaches to every session turn (reference §6.3 steps 1 and 3).

* ``SessionBackend``: the persistence backend of a session's assistant row. Its live answer is
  checkpointed like a chat answer (``checkpoint_target``). It writes the row
  AND the session's newest resume token, read lazily at persist time, whatever the status (so
  an ``error`` row still records it), and persists empty terminals (empty successes too: the
  generic persistence listener writes them). With a ``fence`` (cluster mode: the owner's
  fencing token) its row writes are fenced: a node that lost the conversation writes nothing.
* ``RuntimeTerminalListener`` (``agent-runtime:<sessionId>``, cleanup phase, so it runs after
  persistence): ``on_done`` always reports the turn terminal ``success`` to the host, even when
  the manager holds the stream (``is_conversation_done=False``); ``on_paused``/``on_error`` only
  when ``is_conversation_done`` is not False.

``turn_listeners`` builds the two for one turn (a ``PersistenceListener`` over the backend, then
the terminal listener). Neither decides anything: the host's reducer does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from drupe.chunks.types import UIMessage
from drupe.errors import PersistenceError
from drupe.streaming.listeners.base import BaseListener, TerminalPhase, TerminalResult
from drupe.streaming.listeners.persistence import PersistenceListener

if TYPE_CHECKING:
    from drupe.persistence.agents import AgentStore
    from drupe.persistence.messages import MessageStore
    from drupe.persistence.records import TerminalStatus
    from drupe.sessions.entry import SessionEntry
    from drupe.sessions.state import TurnInfo
    from drupe.streaming.checkpoints import Checkpointer, CheckpointSink
    from drupe.streaming.listeners.base import Listener

__all__ = ["RuntimeTerminalListener", "SessionBackend", "turn_listeners"]

log = logging.getLogger(__name__)


class SessionBackend:
    """Finalizes one session assistant row with the session's newest resume token."""

    kind = "agent-session"
    persists_empty_terminal = True

    def __init__(
        self,
        *,
        messages: MessageStore,
        agents: AgentStore,
        session_id: str,
        message_id: str,
        resume_token: Callable[[], str | None],
        fence: int | None = None,
    ) -> None:
        self.messages = messages
        self.agents = agents
        self.session_id = session_id
        self.message_id = message_id
        self.resume_token = resume_token
        self.fence = fence
        self.checkpoint_target: tuple[CheckpointSink, str] = (
            (messages, message_id)
            if fence is None
            else (messages.fenced_checkpoints(fence), message_id)
        )
        """The live answer is checkpointed into its ``pending`` row like a chat answer (the
        chat policy, ``streaming.checkpoints``), fenced in cluster mode: a kill -9 keeps what
        subscribers saw; the boot reconcile then drops the session's resume token."""

    async def persist_assistant(
        self,
        *,
        message: UIMessage,
        status: TerminalStatus,
        model_id: str | None,
        stats: Mapping[str, Any],
    ) -> None:
        token = self.resume_token()
        await self.messages.finalize_assistant(
            self.message_id,
            parts=message["parts"],
            status=status,
            metadata=message.get("metadata"),
            stats=stats,
            model_id=model_id,
            runtime_resume_token=token,
            fence=self.fence,
        )
        if token is not None:
            await self.agents.record_resume_token(self.session_id, token)

    async def mark_terminal_error(self) -> bool:
        try:
            await self.messages.mark_error(self.message_id, fence=self.fence)
        except PersistenceError:
            log.warning("could not mark message %r as error", self.message_id, exc_info=True)
            return False
        return True


class RuntimeTerminalListener(BaseListener):
    """Tells the host that persistence settled a turn (``agent-runtime:<sessionId>``)."""

    terminal_phase: TerminalPhase | None = "cleanup"

    def __init__(
        self,
        session_id: str,
        turn_id: str,
        *,
        backend: SessionBackend,
        report: Callable[[str, str, TerminalStatus], None],
    ) -> None:
        super().__init__(f"agent-runtime:{session_id}:{turn_id}")
        self.session_id = session_id
        self.turn_id = turn_id
        self.backend = backend
        self.report = report

    async def on_done(self, result: TerminalResult) -> None:
        # An empty success is written by the persistence listener (the backend persists empty
        # terminals), which runs before this cleanup-phase listener.
        self.report(self.session_id, self.turn_id, "success")

    async def on_paused(self, result: TerminalResult) -> None:
        if result.is_conversation_done is not False:
            self.report(self.session_id, self.turn_id, "paused")

    async def on_error(self, result: TerminalResult) -> None:
        if result.is_conversation_done is not False:
            self.report(self.session_id, self.turn_id, "error")


def turn_listeners(
    entry: SessionEntry,
    turn: TurnInfo,
    *,
    messages: MessageStore,
    agents: AgentStore,
    fence: int | None,
    checkpointer: Checkpointer | None,
    report: Callable[[str, str, TerminalStatus], None],
) -> list[Listener]:
    """The runtime listeners of one session turn: its row's persistence, then its terminal."""
    backend = SessionBackend(
        messages=messages,
        agents=agents,
        session_id=entry.session_id,
        message_id=turn.assistant_message_id,
        resume_token=lambda: entry.last_resume_token,
        fence=fence,
    )
    return [
        PersistenceListener(
            backend,
            model_id=turn.config.model_id,
            conversation_id=entry.conversation_id,
            checkpointer=checkpointer,
        ),
        RuntimeTerminalListener(entry.session_id, turn.turn_id, backend=backend, report=report),
    ]
