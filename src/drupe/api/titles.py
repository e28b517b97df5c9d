"""Automatic conversation titles: the first words of the first user message.

``title_from_text`` is the pure rule: markdown markers and whitespace collapsed, the first
``MAX_TITLE_WORDS`` words, at most ``MAX_TITLE_CHARS`` characters (cut at a word, then "…").
A message without text is titled after its first attached file's name.

``Titler`` is the thin shell: a status observer of the stream manager. When a stored
conversation's turn starts (``pending``: its user row is already written) and the conversation
has no title, it reads the first user message and sets the title, only if the conversation is
still untitled (``ConversationStore.title_if_untitled``: a rename in between wins). The write
runs in the manager's task group; a failure is logged and never touches the turn. Every open
tab sees the title: the web UI re-reads the conversation list when a turn starts and ends.
Ephemeral conversations are never titled (they are never written).
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from drupe.errors import DrupeError

if TYPE_CHECKING:
    from drupe.app import Runtime
    from drupe.streaming.contracts import StatusRecord

__all__ = ["MAX_TITLE_CHARS", "MAX_TITLE_WORDS", "Titler", "title_from_parts", "title_from_text"]

MAX_TITLE_WORDS: Final = 8
MAX_TITLE_CHARS: Final = 60
_REMEMBERED: Final = 10_000
_MARKUP = re.compile(r"[`*_#>\[\]()~|]+")

log = logging.getLogger(__name__)


def title_from_text(value: str) -> str | None:
    """A short title from a message's text, or ``None`` if it has no words."""
    words = _MARKUP.sub(" ", value).split()
    if not words:
        return None
    title = ""
    for word in words[:MAX_TITLE_WORDS]:
        candidate = f"{title} {word}".strip()
        if len(candidate) > MAX_TITLE_CHARS:
            return (title or word[: MAX_TITLE_CHARS - 1]) + "…"
        title = candidate
    return title + ("…" if len(words) > MAX_TITLE_WORDS else "")


def title_from_parts(parts: Sequence[Mapping[str, Any]]) -> str | None:
    """The title of a message: from its text parts, else its first file's name."""
    text = " ".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    title = title_from_text(text)
    if title is not None:
        return title
    for part in parts:
        if part.get("type") == "file" and isinstance(part.get("filename"), str):
            return title_from_text(part["filename"])
    return None


class Titler:
    """Titles untitled stored conversations when their first turn starts."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._seen: OrderedDict[str, None] = OrderedDict()

    def observe(self, conversation_id: str, record: StatusRecord) -> None:
        """The status observer (sync): schedule a title for a new, stored conversation."""
        if record.status != "pending" or conversation_id in self._seen:
            return
        runtime = self._runtime
        if runtime.ephemeral.get(conversation_id) is not None or runtime.manager.closing:
            return
        self._seen[conversation_id] = None
        while len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)
        runtime.manager.task_group.start_soon(self._title, conversation_id)

    async def _title(self, conversation_id: str) -> None:
        db = self._runtime.db
        try:
            conversation = await db.conversations.get(conversation_id)
            if conversation is None or conversation.title is not None:
                return
            rows = await db.messages.list_for_conversation(conversation_id)
            first = next((row for row in rows if row.role == "user"), None)
            title = None if first is None else title_from_parts(first.parts)
            if title is not None:
                await db.conversations.title_if_untitled(conversation_id, title)
        except DrupeError:
            log.warning("could not title conversation %s", conversation_id, exc_info=True)
