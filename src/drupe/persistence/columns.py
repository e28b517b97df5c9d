"""The declarative base of Drupe's schema and the two column types it needs on both dialects.

``UtcDateTime`` takes timezone-aware UTC in and gives timezone-aware UTC out, even on SQLite
(which stores no offset); ``JsonValue`` is ``JSON`` on SQLite and ``JSONB`` on PostgreSQL.
``Base`` carries the metadata with deterministic constraint names that every table module
(``tables``, ``identity_tables``, ``work_tables``) declares its rows on. Issues no SQL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Dialect, MetaData
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import JSON, DateTime, TypeDecorator, TypeEngine

__all__ = ["Base", "JsonValue", "UtcDateTime"]

_NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python.

    Naive datetimes are rejected on the way in (they are a bug, not a convention). SQLite keeps
    no offset, so values are normalised to UTC before storage and tagged UTC on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: Drupe stores timezone-aware UTC only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class JsonValue(TypeDecorator[Any]):
    """A JSON document: ``JSON`` on SQLite, ``JSONB`` on PostgreSQL.

    Python ``None`` is stored as SQL ``NULL`` (not the JSON text ``null``), so ``IS NULL`` works.
    """

    impl = JSON(none_as_null=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(JSON(none_as_null=True))


class Base(DeclarativeBase):
    """Declarative base holding Drupe's metadata (with deterministic constraint names)."""

    metadata = MetaData(naming_convention=_NAMING)
