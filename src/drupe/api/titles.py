"""Automatic conversation titles: the first words of the first user message.

``title_from_text`` is the pure rule: markdown markers and whitespace collapsed, the first
``MAX_TITLE_WORDS`` words, at most ``MAX_TITLE_CHARS`` characters (cut at a word, then "…").
A message without text is titled after its first attached file's name.

``title_if_untitled`` is the thin shell: ``POST /api/chat`` calls it once a submitted message
is admitted; it sets the title only if the conversation has none yet (a conditional
``UPDATE``, so a rename wins and later messages change nothing). Every open tab sees the title:
the web UI re-reads the conversation list when a conversation's status changes. Ephemeral
conversations are never titled (they are never written). Conversations started by channels,
tasks or the gateway dialects are not titled here (they are named by their source). A title
model may replace these first words after the first answer (``drupe.api.model_titles``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from drupe.errors import DrupeError

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = [
    "MAX_TITLE_CHARS",
    "MAX_TITLE_WORDS",
    "title_from_parts",
    "title_from_text",
    "title_if_untitled",
]

MAX_TITLE_WORDS: Final = 8
MAX_TITLE_CHARS: Final = 60
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


async def title_if_untitled(
    runtime: Runtime, conversation_id: str, parts: Sequence[Any]
) -> str | None:
    """Title a stored, untitled conversation from the parts of the message just submitted;
    the title if this call set it (the conversation's first message), else ``None``.

    One conditional ``UPDATE`` (``WHERE title IS NULL``): a no-op once the conversation has a
    title. Never raises: a title is not worth failing a submitted message for."""
    if runtime.ephemeral.get(conversation_id) is not None:
        return None
    title = title_from_parts(parts)
    if title is None:
        return None
    try:
        if await runtime.db.conversations.title_if_untitled(conversation_id, title):
            return title
    except DrupeError:
        log.warning("could not title conversation %s", conversation_id, exc_info=True)
    return None
