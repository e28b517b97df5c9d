"""``ChannelStore``: IM chat bindings and the delivery ledger (the only SQL of channels).

* Bindings: (channel, chat) -> the conversation (model target) or ``agent-session:<id>``
  (agent target) the chat talks to. ``bind`` replaces the chat's binding (``/new``).
* Deliveries: one row per answer sent to a chat. ``opened`` records the platform message that
  live edits update (state ``live``). ``claim_terminal`` moves a delivery to ``terminal`` with a
  conditional UPDATE (or an INSERT when nothing was sent yet) and answers True exactly once per
  delivery id, in this process or any later one: that is the at-most-once rule of terminal
  messages. ``delivered`` marks the send done. ``live_deliveries`` lists the answers a crash or a
  shutdown left without their terminal text, for recovery at start.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from drupe.errors import PersistenceError
from drupe.persistence.clock import utc_now
from drupe.persistence.tables import ChannelBindingRow, ChannelDeliveryRow
from drupe.persistence.transaction import Transactions

__all__ = ["ChannelBinding", "ChannelStore", "LiveDelivery"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelBinding:
    channel_id: str
    chat_id: str
    conversation_id: str
    target: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveDelivery:
    id: str
    chat_id: str
    anchor_message_id: str | None
    platform_message_id: str | None


def _binding(row: ChannelBindingRow) -> ChannelBinding:
    return ChannelBinding(
        channel_id=row.channel_id,
        chat_id=row.chat_id,
        conversation_id=row.conversation_id,
        target=row.target,
    )


class ChannelStore:
    """Bindings and deliveries in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    # -- bindings --------------------------------------------------------------------------

    async def binding(self, channel_id: str, chat_id: str) -> ChannelBinding | None:
        async with self._transactions.read() as db:
            row = await db.get(ChannelBindingRow, (channel_id, chat_id))
            return None if row is None else _binding(row)

    async def bind(
        self, channel_id: str, chat_id: str, *, conversation_id: str, target: str
    ) -> ChannelBinding:
        """Bind the chat to ``conversation_id`` (replacing any earlier binding)."""
        now = utc_now()
        async with self._transactions.write() as db:
            row = await db.get(ChannelBindingRow, (channel_id, chat_id))
            if row is None:
                row = ChannelBindingRow(
                    channel_id=channel_id,
                    chat_id=chat_id,
                    conversation_id=conversation_id,
                    target=target,
                    created_at=now,
                    updated_at=now,
                )
                db.add(row)
            else:
                row.conversation_id = conversation_id
                row.target = target
                row.updated_at = now
            return _binding(row)

    async def bindings(self, channel_id: str) -> builtins.list[ChannelBinding]:
        async with self._transactions.read() as db:
            rows = await db.scalars(
                select(ChannelBindingRow)
                .where(ChannelBindingRow.channel_id == channel_id)
                .order_by(ChannelBindingRow.updated_at.desc())
            )
            return [_binding(row) for row in rows]

    # -- deliveries ------------------------------------------------------------------------

    async def opened(
        self,
        delivery_id: str,
        *,
        channel_id: str,
        chat_id: str,
        anchor_message_id: str | None,
        platform_message_id: str | None,
    ) -> None:
        """Record a live answer (before its first send: no platform id yet; after it: the
        platform message that live edits update)."""
        now = utc_now()
        async with self._transactions.write() as db:
            row = await db.get(ChannelDeliveryRow, delivery_id)
            if row is None:
                db.add(
                    ChannelDeliveryRow(
                        id=delivery_id,
                        channel_id=channel_id,
                        chat_id=chat_id,
                        anchor_message_id=anchor_message_id,
                        platform_message_id=platform_message_id,
                        state="live",
                        created_at=now,
                        updated_at=now,
                    )
                )
            elif platform_message_id is not None:
                row.platform_message_id = platform_message_id
                row.updated_at = now

    async def claim_terminal(
        self,
        delivery_id: str,
        *,
        channel_id: str,
        chat_id: str,
        anchor_message_id: str | None,
    ) -> bool:
        """True exactly once per delivery: the caller may send the terminal text."""
        now = utc_now()
        async with self._transactions.write() as db:
            result = await db.execute(
                update(ChannelDeliveryRow)
                .where(ChannelDeliveryRow.id == delivery_id, ChannelDeliveryRow.state == "live")
                .values(state="terminal", updated_at=now)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount == 1:  # type: ignore[attr-defined]
                return True
            if await db.get(ChannelDeliveryRow, delivery_id) is not None:
                return False
        try:
            async with self._transactions.write() as db:
                db.add(
                    ChannelDeliveryRow(
                        id=delivery_id,
                        channel_id=channel_id,
                        chat_id=chat_id,
                        anchor_message_id=anchor_message_id,
                        platform_message_id=None,
                        state="terminal",
                        created_at=now,
                        updated_at=now,
                    )
                )
        except (IntegrityError, PersistenceError):
            return False
        return True

    async def delivered(self, delivery_id: str) -> None:
        async with self._transactions.write() as db:
            await db.execute(
                update(ChannelDeliveryRow)
                .where(ChannelDeliveryRow.id == delivery_id)
                .values(state="delivered", updated_at=utc_now())
                .execution_options(synchronize_session=False)
            )

    async def live_deliveries(self, channel_id: str) -> builtins.list[LiveDelivery]:
        """Answers of ``channel_id`` whose terminal text was never claimed."""
        async with self._transactions.read() as db:
            rows = await db.scalars(
                select(ChannelDeliveryRow)
                .where(ChannelDeliveryRow.channel_id == channel_id)
                .where(ChannelDeliveryRow.state == "live")
                .order_by(ChannelDeliveryRow.created_at)
            )
            return [
                LiveDelivery(
                    id=row.id,
                    chat_id=row.chat_id,
                    anchor_message_id=row.anchor_message_id,
                    platform_message_id=row.platform_message_id,
                )
                for row in rows
            ]
