"""``ApprovalBoard``: which IM messages offer each tool approval, and how it was decided.

Contract (issue 23.5):

* ``offered(approval_id, channel_id, chat_id)``: a chat was shown Approve/Deny buttons for it
  (the chat's ``ChatOutbox`` keeps the platform message ids).
* ``decide(approval_id, approved, by)``: the first decision of an approval settles every chat
  that offered it, once (``settle(channel_id, chat_id, approval_id, verdict)``: its outbox
  edits those messages, buttons removed, to say the decision). Later calls change nothing and
  return False. Decisions come from a chat's own press (``by`` = the presser) and from the
  stream (the tool's output or denial reached a chat's listener: decided on another surface,
  the web UI or the API, ``by`` unknown unless a chat press is ``deciding`` it).
* ``verdict(approval_id)``: the decision, or None while unknown to this process: a press on a
  decided approval is answered "already decided" and acts no more.
* Bounded: the newest ``limit`` approvals are remembered (offers and verdicts).

Pure bookkeeping: no I/O (``settle`` only queues).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

__all__ = ["ApprovalBoard", "Verdict"]

DEFAULT_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True)
class Verdict:
    approved: bool
    by: str | None = None

    def line(self) -> str:
        """What replaces the buttons on a message that offered the approval."""
        word = "✅ Approved" if self.approved else "❌ Denied"
        return f"{word} by {self.by}" if self.by else word

    def already(self) -> str:
        """The answer to a press on an approval that was already decided."""
        word = "approved" if self.approved else "denied"
        return f"Already decided: {word}" + (f" by {self.by}." if self.by else ".")


Settle = Callable[[str, str, str, Verdict], None]


@dataclass(slots=True)
class _Entry:
    offers: set[tuple[str, str]] = field(default_factory=set)
    verdict: Verdict | None = None


class ApprovalBoard:
    def __init__(self, settle: Settle, *, limit: int = DEFAULT_LIMIT) -> None:
        self._settle = settle
        self._limit = limit
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._deciding: dict[str, str] = {}

    def _entry(self, approval_id: str) -> _Entry:
        entry = self._entries.get(approval_id)
        if entry is None:
            entry = self._entries[approval_id] = _Entry()
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)
        return entry

    def offered(self, approval_id: str, channel_id: str, chat_id: str) -> None:
        entry = self._entry(approval_id)
        if entry.verdict is not None:  # offered again after its decision (a replay): settle it
            self._settle(channel_id, chat_id, approval_id, entry.verdict)
            return
        entry.offers.add((channel_id, chat_id))

    def verdict(self, approval_id: str) -> Verdict | None:
        entry = self._entries.get(approval_id)
        return entry.verdict if entry is not None else None

    def deciding(self, approval_id: str) -> str | None:
        """Who is deciding it by a press right now (None: nobody)."""
        return self._deciding.get(approval_id)

    def begin(self, approval_id: str, by: str) -> None:
        """A press is being applied: a decision seen meanwhile in the stream is ``by`` them."""
        self._deciding[approval_id] = by

    def end(self, approval_id: str) -> None:
        self._deciding.pop(approval_id, None)

    def decide(self, approval_id: str, approved: bool, by: str | None = None) -> bool:
        entry = self._entry(approval_id)
        if entry.verdict is not None:
            return False
        entry.verdict = verdict = Verdict(approved, by or self._deciding.get(approval_id))
        offers, entry.offers = entry.offers, set()
        for channel_id, chat_id in sorted(offers):
            self._settle(channel_id, chat_id, approval_id, verdict)
        return True
