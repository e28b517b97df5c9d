"""Titles written by a model after a conversation's first answer.

``POST /api/chat`` first titles a new conversation with the first words of its message
(``drupe.api.titles``), at once. When a title model is configured (``title_model`` in
``config.toml``; by default the default model, except a scripted or the local one), the app's
``Titler`` then starts one background task for that conversation: it waits for the first
answer to leave ``pending`` (polling its row, at most ``ANSWER_WAIT_S``), asks the title model
for a title of the exchange (``drupe.agent.titling``, at most ``TITLE_CALL_S``) and replaces
the first-words title with it, only if the title is still that one (a rename made meanwhile
wins). The answer never waits for any of this; a failure, a timeout or an empty reply leaves
the first words. ``titled`` counts the titles set (``GET /api/status`` answers it, so every
open tab re-reads the conversation list when it changes). At most ``MAX_RUNNING`` tasks run at
once (more first exchanges keep their first words); ``aclose()`` cancels them at shutdown.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

import anyio
from fastapi import Request

from drupe.agent.titling import model_title
from drupe.api.titles import title_from_text
from drupe.lifetimes import TaskOwner
from drupe.persistence.records import MessageRecord

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["ANSWER_WAIT_S", "MAX_RUNNING", "TITLE_CALL_S", "Titler", "get_titler"]

ANSWER_WAIT_S: Final = 600.0
TITLE_CALL_S: Final = 30.0
MAX_RUNNING: Final = 32
_POLL_S: Final = (0.2, 0.5, 1.0, 2.0)

log = logging.getLogger(__name__)


class Titler(TaskOwner):
    """The app's title tasks (in its task group, entered by the app's lifespan) and the number
    of titles they set. Not entered (an app whose lifespan did not run): no model titles."""

    def __init__(self) -> None:
        self.titled = 0
        self.running = 0

    def start(
        self, runtime: Runtime, conversation_id: str, first_words: str, answer_id: str
    ) -> bool:
        """Title ``conversation_id`` in the background once ``answer_id`` is answered; ``False``
        when no title model is configured, the titler is not entered or too many tasks run."""
        model_id = runtime.models.title_model_id()
        group = self._owned_group
        if model_id is None or group is None or self.running >= MAX_RUNNING:
            return False
        self.running += 1
        group.start_soon(self._run, runtime, model_id, conversation_id, first_words, answer_id)
        return True

    async def _run(
        self,
        runtime: Runtime,
        model_id: str,
        conversation_id: str,
        first_words: str,
        answer_id: str,
    ) -> None:
        try:
            title = await self._title(runtime, model_id, answer_id)
            if title is None or title == first_words:
                return
            if await runtime.db.conversations.replace_title(conversation_id, first_words, title):
                self.titled += 1
        except Exception:  # a title is never worth more than a log line (cancels pass through)
            log.warning(
                "could not title conversation %s with %s", conversation_id, model_id, exc_info=True
            )
        finally:
            self.running -= 1

    async def _title(self, runtime: Runtime, model_id: str, answer_id: str) -> str | None:
        answer = await _settled(runtime, answer_id)
        if answer is None or answer.status != "success" or answer.parent_id is None:
            return None
        user = await runtime.db.messages.get(answer.parent_id)
        if user is None:
            return None
        model = runtime.models.resolve(model_id).model
        with anyio.fail_after(TITLE_CALL_S):
            raw = await model_title(model, _text(user.parts), _text(answer.parts))
        return title_from_text(raw) if raw else None


def get_titler(request: Request) -> Titler:
    """The app's titler (``app.state.titler``, made by the app factory)."""
    titler: Titler = request.app.state.titler
    return titler


async def _settled(runtime: Runtime, message_id: str) -> MessageRecord | None:
    """The row once it is no longer ``pending`` (``None``: gone, or still pending at the end)."""
    deadline = anyio.current_time() + ANSWER_WAIT_S
    attempt = 0
    while True:
        row = await runtime.db.messages.get(message_id)
        if row is None or row.status != "pending":
            return row
        if anyio.current_time() >= deadline:
            return None
        await anyio.sleep(_POLL_S[min(attempt, len(_POLL_S) - 1)])
        attempt += 1


def _text(parts: list[dict[str, Any]]) -> str:
    return " ".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
