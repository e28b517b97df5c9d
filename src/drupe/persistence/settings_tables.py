"""Settings kept in the database (issue 22, §5): model providers added from the web UI or API.

A row is one provider (its models as a JSON list); it is overlaid on ``config.toml`` by
``drupe.agent.models.overlay``. The API key column holds the key as given (write-only through
the API: never returned, only its last four characters are shown).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from drupe.persistence.columns import Base, JsonValue, UtcDateTime

__all__ = ["ProviderSettingRow"]


class ProviderSettingRow(Base):
    """One model provider defined in the database; wins over a config.toml one of that name."""

    __tablename__ = "provider_settings"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    type: Mapped[str] = mapped_column(String(32))
    base_url: Mapped[str | None] = mapped_column(Text)
    api_key: Mapped[str | None] = mapped_column(Text)
    models: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue)
    """``[{"name": ..., "context_window": int | None}]``"""
    context_window: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
