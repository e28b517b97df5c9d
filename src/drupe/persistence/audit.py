"""``AuditLog``: security-relevant events (sign-ins, failed sign-ins, tokens and keys made
and revoked, shares, deletions, role changes), newest first for admins.

Contract: ``record`` writes one row: who (actor id and name), what (``action``, e.g.
``auth.login``), to what (``target``), from where (``address``) and a small ``detail`` mapping.
The caller never passes a secret; ``record`` refuses a detail value that looks like one (a
token or a password field), so a mistake is a loud error in tests, not a leak.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from sqlalchemy import select

from drupe.errors import ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.tables import AuditRow
from drupe.persistence.transaction import Transactions

__all__ = ["MAX_PAGE", "AuditEvent", "AuditLog"]

_SECRET_KEYS: Final = frozenset(("password", "token", "secret", "key", "cookie", "authorization"))
_SECRET_PREFIXES: Final = ("drt_", "sk-", "Bearer ")
MAX_PAGE: Final = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEvent:
    id: str
    at: datetime
    actor_id: str | None
    actor_name: str | None
    action: str
    target: str | None
    address: str | None
    detail: Mapping[str, Any] = field(default_factory=dict)


def _event(row: AuditRow) -> AuditEvent:
    return AuditEvent(
        id=row.id,
        at=row.at,
        actor_id=row.actor_id,
        actor_name=row.actor_name,
        action=row.action,
        target=row.target,
        address=row.address,
        detail=dict(row.detail or {}),
    )


def _check_no_secret(detail: Mapping[str, Any]) -> None:
    for key, value in detail.items():
        if key.lower() in _SECRET_KEYS:
            raise ValidationError(f"an audit detail may not carry {key!r}")
        if isinstance(value, str) and value.startswith(_SECRET_PREFIXES):
            raise ValidationError(f"audit detail {key!r} looks like a secret")


class AuditLog:
    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def record(
        self,
        action: str,
        *,
        actor_id: str | None = None,
        actor_name: str | None = None,
        target: str | None = None,
        address: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> AuditEvent:
        _check_no_secret(detail or {})
        row = AuditRow(
            id=f"aud_{uuid.uuid4().hex}",
            at=utc_now(),
            actor_id=actor_id,
            actor_name=actor_name,
            action=action,
            target=target,
            address=address,
            detail=dict(detail or {}),
        )
        async with self._transactions.write() as db:
            db.add(row)
        return _event(row)

    async def list(
        self, *, limit: int = 100, action: str | None = None
    ) -> builtins.list[AuditEvent]:
        if not 1 <= limit <= MAX_PAGE:
            raise ValidationError(f"limit must be between 1 and {MAX_PAGE}")
        query = select(AuditRow).order_by(AuditRow.at.desc(), AuditRow.id.desc()).limit(limit)
        if action is not None:
            query = query.where(AuditRow.action == action)
        async with self._transactions.read() as db:
            return [_event(row) for row in (await db.scalars(query)).all()]
