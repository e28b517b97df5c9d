"""Full-text search over conversation titles and message text.

SQLite: two FTS5 tables, ``conversation_search`` and ``message_search``, whose ``rowid`` is the
``rowid`` of the indexed row, kept in step by triggers (insert, update of the title or the parts,
delete, including the cascade from a deleted conversation). A message's indexed text is the
``text`` of its ``{"type": "text"}`` parts joined by spaces.

PostgreSQL: no extra table; an immutable function ``drupe_parts_text(parts)`` extracts the same
text and two GIN expression indexes cover ``to_tsvector('simple', ...)`` of titles and texts.
The ``simple`` configuration neither stems nor drops stop words, so any language is searchable.

These objects are not in the ORM metadata (neither dialect's DDL can be declared there); the
schema check of the tests leaves out the names listed in ``SEARCH_OBJECTS`` of
``drupe.persistence.search``.

Revision ID: webui_0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "webui_0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_TEXT = (
    "coalesce((SELECT group_concat(json_extract(p.value, '$.text'), ' ') "
    "FROM json_each({row}.parts) AS p "
    "WHERE json_extract(p.value, '$.type') = 'text'), '')"
)

_SQLITE_UP = [
    "CREATE VIRTUAL TABLE conversation_search USING fts5(title, "
    "tokenize = 'unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE message_search USING fts5(body, "
    "tokenize = 'unicode61 remove_diacritics 2')",
    # conversations
    "CREATE TRIGGER conversation_search_insert AFTER INSERT ON conversations BEGIN "
    "INSERT INTO conversation_search(rowid, title) VALUES (NEW.rowid, coalesce(NEW.title, '')); "
    "END",
    "CREATE TRIGGER conversation_search_update AFTER UPDATE OF title ON conversations BEGIN "
    "DELETE FROM conversation_search WHERE rowid = OLD.rowid; "
    "INSERT INTO conversation_search(rowid, title) VALUES (NEW.rowid, coalesce(NEW.title, '')); "
    "END",
    "CREATE TRIGGER conversation_search_delete AFTER DELETE ON conversations BEGIN "
    "DELETE FROM conversation_search WHERE rowid = OLD.rowid; "
    "END",
    # messages
    "CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN "
    "INSERT INTO message_search(rowid, body) VALUES (NEW.rowid, "
    + _SQLITE_TEXT.format(row="NEW")
    + "); END",
    "CREATE TRIGGER message_search_update AFTER UPDATE OF parts ON messages BEGIN "
    "DELETE FROM message_search WHERE rowid = OLD.rowid; "
    "INSERT INTO message_search(rowid, body) VALUES (NEW.rowid, "
    + _SQLITE_TEXT.format(row="NEW")
    + "); END",
    "CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN "
    "DELETE FROM message_search WHERE rowid = OLD.rowid; "
    "END",
    # rows written before this revision
    "INSERT INTO conversation_search(rowid, title) "
    "SELECT rowid, coalesce(title, '') FROM conversations",
    "INSERT INTO message_search(rowid, body) SELECT m.rowid, "
    + _SQLITE_TEXT.format(row="m")
    + " FROM messages AS m",
]

_SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS message_search_delete",
    "DROP TRIGGER IF EXISTS message_search_update",
    "DROP TRIGGER IF EXISTS message_search_insert",
    "DROP TRIGGER IF EXISTS conversation_search_delete",
    "DROP TRIGGER IF EXISTS conversation_search_update",
    "DROP TRIGGER IF EXISTS conversation_search_insert",
    "DROP TABLE IF EXISTS message_search",
    "DROP TABLE IF EXISTS conversation_search",
]

_POSTGRES_UP = [
    "CREATE FUNCTION drupe_parts_text(parts jsonb) RETURNS text "
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ "
    "SELECT coalesce(string_agg(p ->> 'text', ' '), '') "
    "FROM jsonb_array_elements(CASE WHEN jsonb_typeof(parts) = 'array' "
    "THEN parts ELSE '[]'::jsonb END) AS p "
    "WHERE p ->> 'type' = 'text' $$",
    "CREATE INDEX ix_conversations_search ON conversations "
    "USING gin (to_tsvector('simple', coalesce(title, '')))",
    "CREATE INDEX ix_messages_search ON messages "
    "USING gin (to_tsvector('simple', drupe_parts_text(parts)))",
]

_POSTGRES_DOWN = [
    "DROP INDEX IF EXISTS ix_messages_search",
    "DROP INDEX IF EXISTS ix_conversations_search",
    "DROP FUNCTION IF EXISTS drupe_parts_text(jsonb)",
]


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE_UP if dialect == "sqlite" else _POSTGRES_UP:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE_DOWN if dialect == "sqlite" else _POSTGRES_DOWN:
        op.execute(statement)
