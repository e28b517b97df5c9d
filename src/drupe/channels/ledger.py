"""The delivery ledger port of ``ChatOutbox``: at-most-once terminal texts.

``opened`` records an answer's platform message (BEFORE the platform may have it, then with
its id); ``claim_terminal`` grants the one send of an answer's terminal text (False: it was
already claimed, here or by a previous process); ``delivered`` marks it sent. The database's
``ChannelStore`` implements it across restarts; ``MemoryLedger`` in one process.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["DeliveryLedger", "MemoryLedger"]


class DeliveryLedger(Protocol):
    async def opened(
        self,
        delivery_id: str,
        *,
        channel_id: str,
        chat_id: str,
        anchor_message_id: str | None,
        platform_message_id: str | None,
    ) -> None: ...

    async def claim_terminal(
        self, delivery_id: str, *, channel_id: str, chat_id: str, anchor_message_id: str | None
    ) -> bool: ...

    async def delivered(self, delivery_id: str) -> None: ...


class MemoryLedger:
    """An in-process ledger (no restart safety): for channels without a database."""

    def __init__(self) -> None:
        self.claimed: set[str] = set()

    async def opened(self, delivery_id: str, **_: object) -> None:
        return None

    async def claim_terminal(self, delivery_id: str, **_: object) -> bool:
        if delivery_id in self.claimed:
            return False
        self.claimed.add(delivery_id)
        return True

    async def delivered(self, delivery_id: str) -> None:
        return None
