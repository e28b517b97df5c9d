"""``SearchStore``: full-text search over conversation titles and message text.

The index is built by the ``webui_0009`` migration and kept current by the database itself
(SQLite: FTS5 tables filled by triggers; PostgreSQL: GIN expression indexes over
``to_tsvector('simple', ...)``), so no writer of conversations or messages has to remember it.

A query is split into words (``search_terms``); every word must occur, each as a prefix
("deplo" finds "deployment"). Matches in titles come first, then matches in message text, each
group best-ranked first, at most ``limit`` hits in all. A hit's ``snippet`` is a list of
``(text, matched)`` segments, so callers highlight without parsing markup. A query with no
words, too long a query or a bad limit raises ``ValidationError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import String, text

from drupe.errors import ValidationError
from drupe.persistence.tables import UtcDateTime
from drupe.persistence.transaction import Transactions

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_SEARCH_HITS",
    "SEARCH_OBJECTS",
    "SearchHit",
    "SearchStore",
    "fts5_query",
    "search_terms",
    "snippet_segments",
    "tsquery",
]

MAX_QUERY_CHARS: Final = 200
MAX_SEARCH_HITS: Final = 50
_MAX_TERMS: Final = 8
_MAX_TERM_CHARS: Final = 64
_START: Final = "\ue000"
_STOP: Final = "\ue001"
_WORD = re.compile(r"\w+", re.UNICODE)

SEARCH_OBJECTS: Final = frozenset(
    {
        "conversation_search",
        "message_search",
        "ix_conversations_search",
        "ix_messages_search",
    }
)
"""Database objects of the search index that are not in the ORM metadata."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    """One match: a conversation's title (``message_id`` is ``None``) or one of its messages."""

    conversation_id: str
    conversation_title: str | None
    message_id: str | None
    role: str | None
    snippet: tuple[tuple[str, bool], ...]
    at: datetime


def search_terms(query: str) -> list[str]:
    """The words of a query, lowercased, deduplicated, in order (at most 8, 64 chars each)."""
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(f"a search query is at most {MAX_QUERY_CHARS} characters")
    terms: list[str] = []
    for match in _WORD.finditer(query.lower()):
        term = match.group()[:_MAX_TERM_CHARS]
        if term not in terms:
            terms.append(term)
    return terms[:_MAX_TERMS]


def fts5_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression: every term, each as a quoted prefix."""
    return " ".join(f'"{term}"*' for term in terms)


def tsquery(terms: list[str]) -> str:
    """A PostgreSQL ``to_tsquery`` expression: every term, each as a quoted prefix."""
    return " & ".join(f"'{term}':*" for term in terms)


def snippet_segments(marked: str) -> tuple[tuple[str, bool], ...]:
    """Split text marked with the private-use start/stop characters into segments."""
    segments: list[tuple[str, bool]] = []
    for index, piece in enumerate(re.split(f"[{_START}{_STOP}]", marked)):
        if piece:
            segments.append((piece, index % 2 == 1))
    return tuple(segments)


_SQLITE_TITLES = text(
    "SELECT c.id AS id, c.title AS title, c.updated_at AS at, "
    f"highlight(conversation_search, 0, '{_START}', '{_STOP}') AS marked "
    "FROM conversation_search JOIN conversations AS c ON c.rowid = conversation_search.rowid "
    "WHERE conversation_search MATCH :q ORDER BY rank, c.updated_at DESC LIMIT :n"
).columns(at=UtcDateTime)

_SQLITE_MESSAGES = text(
    "SELECT m.conversation_id AS id, c.title AS title, m.id AS message_id, m.role AS role, "
    "m.created_at AS at, "
    f"snippet(message_search, 0, '{_START}', '{_STOP}', '…', 16) AS marked "
    "FROM message_search JOIN messages AS m ON m.rowid = message_search.rowid "
    "JOIN conversations AS c ON c.id = m.conversation_id "
    "WHERE message_search MATCH :q ORDER BY rank, m.created_at DESC LIMIT :n"
).columns(at=UtcDateTime)

_HEADLINE: Final = f"StartSel={_START}, StopSel={_STOP}, MaxWords=24, MinWords=8, MaxFragments=1"

_POSTGRES_TITLES = text(
    "SELECT c.id AS id, c.title AS title, c.updated_at AS at, "
    "ts_headline('simple', c.title, to_tsquery('simple', :q), :opts) AS marked "
    "FROM conversations AS c "
    "WHERE to_tsvector('simple', coalesce(c.title, '')) @@ to_tsquery('simple', :q) "
    "ORDER BY ts_rank(to_tsvector('simple', coalesce(c.title, '')), "
    "to_tsquery('simple', :q)) DESC, c.updated_at DESC LIMIT :n"
).columns(at=UtcDateTime, marked=String)

_POSTGRES_MESSAGES = text(
    "SELECT m.conversation_id AS id, c.title AS title, m.id AS message_id, m.role AS role, "
    "m.created_at AS at, "
    "ts_headline('simple', drupe_parts_text(m.parts), to_tsquery('simple', :q), :opts) "
    "AS marked "
    "FROM messages AS m JOIN conversations AS c ON c.id = m.conversation_id "
    "WHERE to_tsvector('simple', drupe_parts_text(m.parts)) @@ to_tsquery('simple', :q) "
    "ORDER BY ts_rank(to_tsvector('simple', drupe_parts_text(m.parts)), "
    "to_tsquery('simple', :q)) DESC, m.created_at DESC LIMIT :n"
).columns(at=UtcDateTime, marked=String)


class SearchStore:
    """Searches one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions, *, dialect: str) -> None:
        self._transactions = transactions
        self._sqlite = dialect == "sqlite"

    async def search(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Titles, then message texts, that contain every word of ``query`` (as prefixes)."""
        if not 1 <= limit <= MAX_SEARCH_HITS:
            raise ValidationError(f"limit must be between 1 and {MAX_SEARCH_HITS}, got {limit!r}")
        terms = search_terms(query)
        if not terms:
            raise ValidationError("a search query needs at least one word")
        if self._sqlite:
            params: dict[str, object] = {"q": fts5_query(terms), "n": limit}
            titles_sql, messages_sql = _SQLITE_TITLES, _SQLITE_MESSAGES
        else:
            params = {"q": tsquery(terms), "n": limit, "opts": _HEADLINE}
            titles_sql, messages_sql = _POSTGRES_TITLES, _POSTGRES_MESSAGES
        async with self._transactions.read() as db:
            titles = (await db.execute(titles_sql, params)).mappings().all()
            messages = (await db.execute(messages_sql, params)).mappings().all()
        hits = [
            SearchHit(
                conversation_id=row["id"],
                conversation_title=row["title"],
                message_id=None,
                role=None,
                snippet=snippet_segments(row["marked"] or ""),
                at=row["at"],
            )
            for row in titles
        ]
        hits.extend(
            SearchHit(
                conversation_id=row["id"],
                conversation_title=row["title"],
                message_id=row["message_id"],
                role=row["role"],
                snippet=snippet_segments(row["marked"] or ""),
                at=row["at"],
            )
            for row in messages
        )
        return hits[:limit]
