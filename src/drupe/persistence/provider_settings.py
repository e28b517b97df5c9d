"""``ProviderSettingStore``: model providers kept in the database (issue 22, §5).

Plain CRUD over ``provider_settings``; the rules on what a provider may look like live in
``drupe.agent.models.overlay`` (checked before anything is written, so nothing is half-saved).
``ProviderSetting.api_key`` is excluded from ``repr``; the store never logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select

from drupe.errors import ValidationError
from drupe.persistence.clock import utc_now
from drupe.persistence.tables import ProviderSettingRow
from drupe.persistence.transaction import Transactions

__all__ = ["ProviderSetting", "ProviderSettingStore"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSetting:
    """One provider as stored; ``models`` are ``(name, context_window)`` pairs."""

    name: str
    type: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    models: tuple[tuple[str, int | None], ...] = ()
    context_window: int | None = None


def _setting(row: ProviderSettingRow) -> ProviderSetting:
    return ProviderSetting(
        name=row.name,
        type=row.type,
        base_url=row.base_url,
        api_key=row.api_key,
        models=tuple((str(m["name"]), m.get("context_window")) for m in row.models),
        context_window=row.context_window,
    )


def _models_json(setting: ProviderSetting) -> list[dict[str, Any]]:
    return [{"name": name, "context_window": window} for name, window in setting.models]


class ProviderSettingStore:
    """Providers in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    async def list(self) -> list[ProviderSetting]:
        async with self._transactions.read() as db:
            rows = await db.scalars(select(ProviderSettingRow).order_by(ProviderSettingRow.name))
            return [_setting(row) for row in rows]

    async def get(self, name: str) -> ProviderSetting | None:
        async with self._transactions.read() as db:
            row = await db.get(ProviderSettingRow, name)
            return _setting(row) if row is not None else None

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
                    api_key=setting.api_key,
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
            row.api_key = setting.api_key
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
