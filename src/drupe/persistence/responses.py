"""``ResponseStore``: Responses-API responses kept with ``store: true``, per API key.

A stored response is addressed by its id AND the key that created it (``key_id``; None when
the gateway runs without keys): ``get`` and ``delete`` with another key find nothing, so one
client can never read or chain from another's responses. ``input_items`` holds every input
item the response answered (the earlier responses of a ``previous_response_id`` chain
included); ``body`` is the response object as it was returned.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from drupe.persistence.clock import utc_now
from drupe.persistence.records import StoredResponse
from drupe.persistence.tables import GatewayResponseRow
from drupe.persistence.transaction import Transactions

__all__ = ["ResponseStore"]


def _record(row: GatewayResponseRow) -> StoredResponse:
    return StoredResponse(
        id=row.id,
        key_id=row.key_id,
        model=row.model,
        created_at=row.created_at,
        input_items=list(row.input_items),
        body=dict(row.body),
    )


def _owned(response_id: str, key_id: str | None) -> Any:
    owner = (
        GatewayResponseRow.key_id.is_(None)
        if key_id is None
        else GatewayResponseRow.key_id == key_id
    )
    return (GatewayResponseRow.id == response_id) & owner


class ResponseStore:
    """Stored responses in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def put(
        self,
        *,
        response_id: str,
        key_id: str | None,
        model: str,
        input_items: list[dict[str, Any]],
        body: dict[str, Any],
    ) -> StoredResponse:
        row = GatewayResponseRow(
            id=response_id,
            key_id=key_id,
            model=model,
            created_at=utc_now(),
            input_items=input_items,
            body=body,
        )
        async with self._transactions.write() as db:
            db.add(row)
        return _record(row)

    async def get(self, response_id: str, key_id: str | None) -> StoredResponse | None:
        """The response ``response_id`` if ``key_id`` created it, else None."""
        async with self._transactions.read() as db:
            row = await db.scalar(select(GatewayResponseRow).where(_owned(response_id, key_id)))
            return None if row is None else _record(row)

    async def delete(self, response_id: str, key_id: str | None) -> bool:
        """Delete the response if ``key_id`` created it; False when there was none."""
        async with self._transactions.write() as db:
            result = await db.execute(
                delete(GatewayResponseRow)
                .where(_owned(response_id, key_id))
                .returning(GatewayResponseRow.id)
            )
            return result.first() is not None
