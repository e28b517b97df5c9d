"""``ProviderSettingStore``: model providers kept in the database (issue 22, §5).

CRUD over ``provider_settings``; the rules on what a provider may look like live in
``drupe.agent.models.overlay`` (checked before anything is written, so nothing is half-saved).

* ``api_key`` is sealed at rest (``drupe.persistence.secret_box``): the column holds
  ``fernet:<token>``, and the store opens it on every read. A key sealed under another key than
  this process's reads as no key, with ``key_unreadable`` set and one warning that names the
  provider (never the value). ``reseal()`` seals the keys written before sealing existed and
  re-seals the ones sealed under a previous secret key.
* ``ProviderSetting.api_key`` is excluded from ``repr``; nothing here logs a key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select

from drupe.errors import ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.secret_box import SecretBox, SecretUnreadable
from drupe.persistence.tables import ProviderSettingRow
from drupe.persistence.transaction import Transactions

__all__ = ["ProviderSetting", "ProviderSettingStore"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSetting:
    """One provider as stored; ``models`` are ``(name, context_window)`` pairs."""

    name: str
    type: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    models: tuple[tuple[str, int | None], ...] = ()
    context_window: int | None = None
    key_unreadable: bool = False
    """The stored key was sealed under another key than this process's (``api_key`` is None)."""


def _models_json(setting: ProviderSetting) -> list[dict[str, Any]]:
    return [{"name": name, "context_window": window} for name, window in setting.models]


class ProviderSettingStore:
    """Providers in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions, secrets: SecretBox) -> None:
        self._transactions = transactions
        self._secrets = secrets
        self._warned: set[str] = set()

    def _setting(self, row: ProviderSettingRow) -> ProviderSetting:
        api_key, unreadable = row.api_key, False
        if api_key is not None:
            try:
                api_key = self._secrets.open(api_key)
            except SecretUnreadable as err:
                api_key, unreadable = None, True
                if row.name not in self._warned:
                    self._warned.add(row.name)
                    log.warning("the API key of the stored provider %r: %s", row.name, err)
        return ProviderSetting(
            name=row.name,
            type=row.type,
            base_url=row.base_url,
            api_key=api_key,
            models=tuple((str(m["name"]), m.get("context_window")) for m in row.models),
            context_window=row.context_window,
            key_unreadable=unreadable,
        )

    def _sealed(self, api_key: str | None) -> str | None:
        return None if api_key is None else self._secrets.seal(api_key)

    async def reseal(self, *, dry_run: bool = False) -> int:
        """Seal every stored key under the current secret key: the ones written before sealing
        existed and the ones sealed under a previous key (a rotation); returns how many. A key
        none of the secret keys opens is left as it is (it reads as unreadable). ``dry_run``
        counts them in read transactions and changes nothing."""
        async with self._transactions.read() as db:
            rows = await db.scalars(
                select(ProviderSettingRow.name).where(ProviderSettingRow.api_key.is_not(None))
            )
            names = list(rows)
        resealed = 0
        for name in names:
            transaction = self._transactions.read() if dry_run else self._transactions.write()
            async with transaction as db:
                row = await db.get(ProviderSettingRow, name)
                if row is None or row.api_key is None:
                    continue
                try:
                    fresh = self._secrets.reseal(row.api_key)
                except SecretUnreadable:
                    continue
                if fresh is not None:
                    resealed += 1
                    if not dry_run:
                        row.api_key = fresh
        return resealed

    async def list(self) -> list[ProviderSetting]:
        async with self._transactions.read() as db:
            rows = await db.scalars(select(ProviderSettingRow).order_by(ProviderSettingRow.name))
            return [self._setting(row) for row in rows]

    async def get(self, name: str) -> ProviderSetting | None:
        async with self._transactions.read() as db:
            row = await db.get(ProviderSettingRow, name)
            return self._setting(row) if row is not None else None

    async def create(self, setting: ProviderSetting) -> None:
        """Store a new provider; ``ValidationError`` if the name is taken."""
        async with self._transactions.write() as db:
            if await db.get(ProviderSettingRow, setting.name) is not None:
                raise ValidationError(f"a provider named {setting.name!r} already exists")
            db.add(
                ProviderSettingRow(
                    name=setting.name,
                    type=setting.type,
                    base_url=setting.base_url,
                    api_key=self._sealed(setting.api_key),
                    models=_models_json(setting),
                    context_window=setting.context_window,
                    updated_at=utc_now(),
                )
            )

    async def replace(self, setting: ProviderSetting) -> bool:
        """Overwrite a stored provider (its key too); False if there is none of that name."""
        async with self._transactions.write() as db:
            row = await db.get(ProviderSettingRow, setting.name)
            if row is None:
                return False
            row.type = setting.type
            row.base_url = setting.base_url
            row.api_key = self._sealed(setting.api_key)
            row.models = _models_json(setting)
            row.context_window = setting.context_window
            row.updated_at = utc_now()
            return True

    async def delete(self, name: str) -> bool:
        async with self._transactions.write() as db:
            result = await db.execute(
                delete(ProviderSettingRow).where(ProviderSettingRow.name == name)
            )
            return bool(getattr(result, "rowcount", 0))
