"""The shared services of the multi-node tests: a fresh PostgreSQL database per cluster and a
key prefix on the shared Redis (``DRUPE_TEST_POSTGRES_URL``, ``DRUPE_TEST_REDIS_URL``).

``new_database()`` creates ``drupe_mn_<hex>`` (empty: the nodes migrate it) and returns its
SQLAlchemy URL; ``drop_database(url)`` drops it (only ``drupe_mn_*``); ``delete_keys(prefix)``
deletes one prefix's keys, never a whole db (other sessions share it).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import asyncpg
import redis
from sqlalchemy.engine import make_url

__all__ = [
    "DEFAULT_CONFIG",
    "delete_keys",
    "drop_database",
    "new_database",
    "redis_url",
]

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
DEFAULT_CONFIG = 'default_model = "scripted:echo"\n'


def redis_url() -> str:
    return os.environ.get("DRUPE_TEST_REDIS_URL", DEFAULT_REDIS_URL)


def _server_url() -> Any:
    return make_url(os.environ.get("DRUPE_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))


async def _admin(statement: str) -> None:
    dsn = _server_url().set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def new_database() -> str:
    """A new empty database on the shared server; its SQLAlchemy (asyncpg) URL."""
    name = f"drupe_mn_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = _server_url().set(drivername="postgresql+asyncpg", database=name)
    return str(url.render_as_string(hide_password=False))


def drop_database(url: str) -> None:
    name = make_url(url).database
    assert name is not None and name.startswith("drupe_mn_")
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def delete_keys(prefix: str) -> None:
    """Delete the keys of one prefix (never the whole db: other sessions share it)."""
    client = redis.Redis.from_url(redis_url())
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
