"""Drupe's data layer: SQLAlchemy 2 async over SQLite (default) or PostgreSQL.

Owns the schema (``tables`` + Alembic ``migrations``), the stores (the only code that issues
SQL), boot reconciliation, and the persistence backends the stream manager's persistence
listener writes through. The core packages (``chunks``, ``streaming``, ``agent``, ``sessions``,
``tools``) never import this package's SQL dependencies directly; they see records and backends.
"""

from __future__ import annotations

from drupe.persistence.api_keys import ApiKeyStore
from drupe.persistence.backends import PlaceholderBackend
from drupe.persistence.checkpoints import FencedCheckpoints
from drupe.persistence.conversations import ConversationStore
from drupe.persistence.db import Database, database_url, open_database, upgrade
from drupe.persistence.messages import MessageStore
from drupe.persistence.reconcile import RESTART_ERROR, RESTART_ERROR_PART
from drupe.persistence.records import (
    ApiKeyRecord,
    ConversationRecord,
    MessageRecord,
    MessageRole,
    MessageStatus,
    NewMessage,
    NewPlaceholder,
    TerminalStatus,
)
from drupe.persistence.takeover import NODE_LOST, takeover_error_part

__all__ = [
    "NODE_LOST",
    "RESTART_ERROR",
    "RESTART_ERROR_PART",
    "ApiKeyRecord",
    "ApiKeyStore",
    "ConversationRecord",
    "ConversationStore",
    "Database",
    "FencedCheckpoints",
    "MessageRecord",
    "MessageRole",
    "MessageStatus",
    "MessageStore",
    "NewMessage",
    "NewPlaceholder",
    "PlaceholderBackend",
    "TerminalStatus",
    "database_url",
    "open_database",
    "takeover_error_part",
    "upgrade",
]
