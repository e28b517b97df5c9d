"""What the host asks of a session's live runtime connection (steer a follow-up into the live
turn, read the context usage, answer an in-place approval), and the turn a runtime starts.

* ``redirect_or_queue``: with a redirectable turn, a connection and a driver that can steer,
  the reducer folds ``RedirectAccepted`` first (the runtime may reach the boundary before
  ``redirect`` returns), then the input goes in as a system reminder; a refusal or a driver
  failure (logged, isolated) folds ``SteerUndeliveredInputs`` and the item is ``"queued"``.
  Otherwise the reducer folds ``QueueFollowUp``.
* ``fetch_context_usage``: fetched at most once per ended turn (each fetch may cost the runtime
  provider requests), under the entry's lock; otherwise the last known value.
* ``answer_approval``: resolves an approval the connection holds; a denial routes a
  ``tool-output-denied`` chunk into the turn. False when the entry does not hold it.
* ``turn_started_by_runtime``: a turn the runtime began by itself gets its own assistant row (no
  user row), parented under the answer the runtime gave before it (not a follow-up submitted
  meanwhile); on a busy session the reducer buffers it until the session is idle.

Each receives the connection and the callables it needs, never the host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal, cast

from drupe.chunks.types import Chunk
from drupe.ids import new_message_id, next_turn_id
from drupe.sessions.drivers.base import (
    Connection,
    ContextUsageConnection,
    SteerableConnection,
    UserInput,
)
from drupe.sessions.entry import SessionEntry, runtime_turn_known
from drupe.sessions.session_events import (
    Event,
    QueueFollowUp,
    RedirectAccepted,
    RuntimeTurnStarted,
    SteerUndeliveredInputs,
)
from drupe.sessions.state import FollowUp, TurnExec, TurnInfo, can_redirect, turn_config

__all__ = [
    "answer_approval",
    "fetch_context_usage",
    "redirect_or_queue",
    "turn_started_by_runtime",
]

log = logging.getLogger("drupe.sessions.host")


async def redirect_or_queue(
    entry: SessionEntry,
    item: FollowUp,
    *,
    connection: Connection | None,
    can_steer: bool,
    apply: Callable[[SessionEntry, Event], None],
) -> Literal["redirected", "queued"]:
    """Redirect ``item`` into the live turn, or queue it (see the module docstring)."""
    turn_id = can_redirect(entry.state, item.config)
    if turn_id is not None and connection is not None and can_steer:
        apply(entry, RedirectAccepted(turn_id, item))
        steerable = cast(SteerableConnection, connection)
        try:
            accepted = await steerable.redirect(
                UserInput(message=item.message, system_reminder=True, headless=item.headless)
            )
        except Exception:  # isolation boundary: a driver failing to steer
            log.exception("redirect into session %r failed", entry.session_id)
            accepted = False
        if accepted:
            return "redirected"
        apply(entry, SteerUndeliveredInputs((item.user_message_id,)))
        return "queued"
    apply(entry, QueueFollowUp(item))
    return "queued"


async def fetch_context_usage(
    entry: SessionEntry, connection: Connection | None, *, supported: bool
) -> Mapping[str, Any] | None:
    """The entry's context usage, refreshed from the runtime when a turn ended since."""
    if connection is None or entry.usage_fetched_at == entry.turns_ended or not supported:
        return entry.context_usage
    async with entry.usage_lock:
        if entry.usage_fetched_at != entry.turns_ended:
            turns = entry.turns_ended
            usage = await cast(ContextUsageConnection, connection).context_usage()
            entry.usage_fetched_at = turns
            if usage is not None:
                entry.context_usage = dict(usage)
    return entry.context_usage


async def answer_approval(
    entry: SessionEntry,
    connection: Connection | None,
    approval_id: str,
    *,
    approved: bool,
    reason: str | None,
    route_chunk: Callable[[SessionEntry, Chunk], None],
) -> bool:
    """Resolve an in-place approval the connection holds (see the module docstring)."""
    if approval_id not in entry.approvals or connection is None:
        return False
    tool_call_id, _headless = entry.approvals.pop(approval_id)
    resolved = await connection.respond_approval(approval_id, approved=approved, reason=reason)
    if resolved and not approved:
        route_chunk(entry, {"type": "tool-output-denied", "toolCallId": tool_call_id})
    return resolved


def turn_started_by_runtime(
    entry: SessionEntry, *, apply: Callable[[SessionEntry, Event], None]
) -> None:
    """Register the turn the runtime began by itself (see the module docstring)."""
    turn = TurnInfo(
        turn_id=next_turn_id(),
        assistant_message_id=new_message_id(),
        user_message_id="",
        config=turn_config(entry.info.model_id),
        message={"id": "", "role": "user", "parts": []},
        pre_admitted=True,
        runtime=True,
    )
    previous = entry.state.waiting[-1] if entry.state.waiting else entry.state.execution
    if isinstance(previous, TurnExec):
        entry.runtime_parents[turn.turn_id] = previous.turn.assistant_message_id
    apply(entry, RuntimeTurnStarted(turn))
    for turn_id in [t for t in entry.runtime_parents if not runtime_turn_known(entry, t)]:
        del entry.runtime_parents[turn_id]  # refused, or dropped by a stop
