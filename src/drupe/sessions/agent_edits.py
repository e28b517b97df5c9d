"""Push an agent edit to its live sessions (reference §6.7 "Push", scenario 37).

Never retargets a live turn: a live turn keeps its connection unless the runtime says the
update FAILED (then the turn is paused and the connection closed, the queue kept) or the model
was removed (the turn is paused and the session's connection closed). ``rebuild`` closes only
an idle session; otherwise the next fresh turn reconciles and reconnects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from drupe.sessions.drivers.base import ConnectTarget
from drupe.sessions.state import Transition, is_busy

if TYPE_CHECKING:
    from drupe.sessions.connections import ConnectionKeeper
    from drupe.sessions.host import SessionEntry
    from drupe.sessions.lookup import SessionLookup

__all__ = ["apply_agent_update"]

log = logging.getLogger(__name__)


async def apply_agent_update(
    entries: Iterable[SessionEntry],
    agent_id: str,
    *,
    lookup: SessionLookup,
    connections: ConnectionKeeper,
    abort: Callable[[str, str], bool],
    runtime_failed: Callable[[SessionEntry, Mapping[str, Any]], None],
) -> None:
    """Push an agent edit to its live sessions (reference §6.7 "Push").

    Model removed: pause the live turn (``agent-model-cleared``) and close the session.
    Otherwise reconcile the live connection: ``rebuild`` closes it only when nothing runs
    (else the next fresh turn reconnects); ``failed`` (or a raise) pauses the live turn and
    closes the connection but keeps the queued turns; ``invalid`` closes the session.
    """
    for entry in [e for e in entries if e.info.agent_id == agent_id]:
        info = await lookup.load(entry.session_id)
        if info is None:
            continue
        entry.info = info
        connection = connections.current(entry)
        if not info.model_id:
            abort(entry.conversation_id, "agent-model-cleared")
            await connections.close_now(entry, "agent model cleared")
            continue
        if connection is None:
            continue
        try:
            verdict = await connection.reconcile(ConnectTarget.of(info))
        except Exception:  # isolation boundary: a throwing reconcile counts as failed
            log.exception("reconcile of session %r raised", entry.session_id)
            verdict = "failed"
        if connections.current(entry) is not connection:
            continue
        if verdict == "failed":
            entry.keep_queue_on_stop = True
            if not abort(entry.conversation_id, "agent-policy-update-failed"):
                entry.keep_queue_on_stop = False
            await connections.close_now(entry, "policy update failed")
            if isinstance(entry.state.execution, Transition):
                # A roll cannot continue without its runtime: A2 ends ``error``.
                runtime_failed(
                    entry, {"name": "AgentPolicyUpdateFailed", "message": "reconcile failed"}
                )
        elif verdict == "invalid" or (verdict == "rebuild" and not is_busy(entry.state)):
            await connections.close_now(entry, f"agent update: {verdict}")
