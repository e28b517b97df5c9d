"""The debounce burst: a pure value and its rules (the chat worker is its async shell).

A burst opens with its first message at ``now`` and closes at ``deadline``: ``debounce``
seconds after its LAST message, but never later than ``2 x debounce`` after its FIRST (so a
chatty sender cannot hold the chat forever). ``merge`` makes the one message the burst is
dispatched as: texts joined with a newline (empty ones skipped), attachments and refusals
concatenated, the first message's sender and chat, the last message's id.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from drupe.channels.contract import Inbound

__all__ = ["Burst", "merge"]


@dataclass(frozen=True, slots=True)
class Burst:
    messages: tuple[Inbound, ...] = ()
    first_at: float = 0.0
    deadline: float = 0.0

    def add(self, message: Inbound, now: float, debounce: float) -> Burst:
        first_at = now if not self.messages else self.first_at
        deadline = min(now + debounce, first_at + 2 * debounce)
        return Burst((*self.messages, message), first_at, deadline)

    def __len__(self) -> int:
        return len(self.messages)


def merge(messages: tuple[Inbound, ...] | list[Inbound]) -> Inbound:
    first, last = messages[0], messages[-1]
    return replace(
        first,
        text="\n".join(m.text for m in messages if m.text.strip()),
        message_id=last.message_id,
        attachments=tuple(a for m in messages for a in m.attachments),
        oversized=tuple(n for m in messages for n in m.oversized),
    )
