"""``ApiKeyStore``: gateway API keys, stored as SHA-256 hashes only.

A key is ``drp_`` followed by 32 random URL-safe characters. ``create`` returns the plaintext
once; the database keeps its SHA-256 (hex) and a short ``prefix`` that listings show so a person
can tell keys apart. ``verify`` looks a key up by its hash, refuses revoked keys and records
``last_used_at``. The plaintext is never stored, logged or put in an exception message.

A key may carry scopes (``KeyScopes``): the models and agents it may use (None: any) and its
requests-per-minute and tokens-per-day budgets (None: unlimited). The gateway enforces them
(``drupe.gateway.limits``); this store only keeps them.
"""

from __future__ import annotations

import builtins
import hashlib
import secrets
import uuid
from typing import Final

from sqlalchemy import or_, select, update

from drupe.errors import UsageError, ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.records import ApiKeyRecord, KeyScopes
from drupe.persistence.tables import ApiKeyRow
from drupe.persistence.transaction import Transactions

__all__ = ["KEY_PREFIX", "ApiKeyStore", "hash_key"]

KEY_PREFIX: Final = "drp_"
_RANDOM_CHARS: Final = 32
_SHOWN_CHARS: Final = len(KEY_PREFIX) + 8


def hash_key(plaintext: str) -> str:
    """Return the SHA-256 hex digest under which a key is stored."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def _new_key() -> str:
    # token_urlsafe(24) gives exactly 32 characters from the URL-safe alphabet.
    key = KEY_PREFIX + secrets.token_urlsafe(_RANDOM_CHARS * 3 // 4)
    assert len(key) == len(KEY_PREFIX) + _RANDOM_CHARS
    return key


def _record(row: ApiKeyRow) -> ApiKeyRecord:
    return ApiKeyRecord(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
        allowed_models=tuple(row.allowed_models) if row.allowed_models is not None else None,
        allowed_agents=tuple(row.allowed_agents) if row.allowed_agents is not None else None,
        requests_per_minute=row.requests_per_minute,
        tokens_per_day=row.tokens_per_day,
        owner_id=row.owner_id,
    )


def _check_scopes(scopes: KeyScopes) -> None:
    for label, budget in (
        ("requests per minute", scopes.requests_per_minute),
        ("tokens per day", scopes.tokens_per_day),
    ):
        if budget is not None and budget < 1:
            raise ValidationError(f"{label} must be a positive integer, got {budget}")
    for label, names in (("model", scopes.models), ("agent", scopes.agents)):
        if names is not None and any(not name.strip() for name in names):
            raise ValidationError(f"an allowed {label} id must not be empty")


class ApiKeyStore:
    """API keys in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def create(
        self, name: str, scopes: KeyScopes | None = None, *, owner_id: str | None = None
    ) -> tuple[str, ApiKeyRecord]:
        """Create a key; return ``(plaintext, record)``. The plaintext is not kept anywhere."""
        if not name.strip():
            raise ValidationError("an API key needs a non-empty name")
        scopes = scopes or KeyScopes()
        _check_scopes(scopes)
        plaintext = _new_key()
        row = ApiKeyRow(
            id=f"key_{uuid.uuid4().hex[:16]}",
            name=name,
            prefix=plaintext[:_SHOWN_CHARS],
            key_hash=hash_key(plaintext),
            created_at=utc_now(),
            last_used_at=None,
            revoked_at=None,
            allowed_models=list(scopes.models) if scopes.models is not None else None,
            allowed_agents=list(scopes.agents) if scopes.agents is not None else None,
            requests_per_minute=scopes.requests_per_minute,
            tokens_per_day=scopes.tokens_per_day,
            owner_id=owner_id,
        )
        async with self._transactions.write() as db:
            db.add(row)
        return plaintext, _record(row)

    async def verify(self, plaintext: str) -> ApiKeyRecord | None:
        """Return the key's record if ``plaintext`` is a live key (and stamp its use)."""
        if not plaintext.startswith(KEY_PREFIX) or len(plaintext) > 256:
            return None
        async with self._transactions.write() as db:
            row = await db.scalar(
                update(ApiKeyRow)
                .where(ApiKeyRow.key_hash == hash_key(plaintext), ApiKeyRow.revoked_at.is_(None))
                .values(last_used_at=utc_now())
                .returning(ApiKeyRow)
            )
            return None if row is None else _record(row)

    async def list(self, *, owner_id: str | None = None) -> builtins.list[ApiKeyRecord]:
        """Return every key (of ``owner_id`` when given), revoked ones included, oldest first."""
        query = select(ApiKeyRow).order_by(ApiKeyRow.created_at)
        if owner_id is not None:
            query = query.where(ApiKeyRow.owner_id == owner_id)
        async with self._transactions.read() as db:
            rows = await db.scalars(query)
            return [_record(row) for row in rows.all()]

    async def revoke(self, id_or_prefix: str) -> ApiKeyRecord:
        """Revoke the key with this id or listing prefix; revoking twice keeps the first time.

        Raises ``UsageError`` when nothing matches or a prefix matches more than one key.
        """
        match = or_(ApiKeyRow.id == id_or_prefix, ApiKeyRow.prefix == id_or_prefix)
        async with self._transactions.write() as db:
            rows = (await db.scalars(select(ApiKeyRow).where(match))).all()
            if not rows:
                raise UsageError(f"no API key with id or prefix {id_or_prefix!r}")
            if len(rows) > 1:
                raise UsageError(f"prefix {id_or_prefix!r} matches {len(rows)} keys; use the id")
            row = rows[0]
            if row.revoked_at is None:
                row.revoked_at = utc_now()
            return _record(row)
