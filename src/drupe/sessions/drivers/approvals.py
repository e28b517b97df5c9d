"""``PendingApprovals``: the in-place approvals a driver connection holds (both drivers).

A connection's tool-permission callback ``open``s a pending decision, emits its
``tool-approval-request`` event and ``wait``s; the host's ``respond_approval`` resolves it with
``respond``; a closing connection denies everything still open with ``deny_all``. An entry
lives from ``open`` to the end of its ``wait`` only, so the map holds at most the approvals the
runtime is waiting on at once.

Must never: resolve one approval twice, or leave a waiter hanging after ``deny_all``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

__all__ = ["Decision", "PendingApprovals"]


@dataclass(slots=True, eq=False)
class Decision:
    """One pending decision; ``approved``/``reason`` are set when ``done`` is."""

    tool_call_id: str = ""
    done: anyio.Event = field(default_factory=anyio.Event)
    approved: bool = False
    reason: str | None = None


class PendingApprovals:
    """Open approvals by id (see the module docstring)."""

    def __init__(self) -> None:
        self._open: dict[str, Decision] = {}

    def __len__(self) -> int:
        return len(self._open)

    def open(self, approval_id: str, tool_call_id: str = "") -> Decision:
        decision = self._open[approval_id] = Decision(tool_call_id)
        return decision

    async def wait(self, approval_id: str, decision: Decision) -> Decision:
        """Wait until ``decision`` is resolved; the entry is removed however the wait ends."""
        try:
            await decision.done.wait()
        finally:
            if self._open.get(approval_id) is decision:
                del self._open[approval_id]
        return decision

    def respond(self, approval_id: str, *, approved: bool, reason: str | None = None) -> bool:
        """Resolve an open approval; False when the id is unknown or already resolved."""
        decision = self._open.get(approval_id)
        if decision is None or decision.done.is_set():
            return False
        decision.approved = approved
        decision.reason = reason
        decision.done.set()
        return True

    def deny_all(self, reason: str) -> None:
        """Deny every open approval (the connection is closing)."""
        for approval_id in list(self._open):
            self.respond(approval_id, approved=False, reason=reason)
