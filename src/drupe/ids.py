"""Typed identifiers and their factories.

Ids are plain strings on the wire; ``NewType`` keeps them apart in signatures. Attempt ids are
process-wide and monotonic: a late event carrying an older attempt id is stale and is dropped.
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Final, NewType

__all__ = [
    "AttemptId",
    "ConversationId",
    "ExecutionId",
    "ListenerId",
    "MessageId",
    "SessionId",
    "TurnId",
    "SESSION_PREFIX",
    "is_session_conversation",
    "new_message_id",
    "next_attempt_id",
    "next_turn_id",
    "session_conversation_id",
    "session_id_of",
]

ConversationId = NewType("ConversationId", str)
TurnId = NewType("TurnId", str)
ExecutionId = NewType("ExecutionId", str)
MessageId = NewType("MessageId", str)
ListenerId = NewType("ListenerId", str)
SessionId = NewType("SessionId", str)
AttemptId = NewType("AttemptId", int)

_attempts = itertools.count(1)
_turns = itertools.count(1)


def next_attempt_id() -> AttemptId:
    """Return the next process-wide attempt id (strictly increasing)."""
    return AttemptId(next(_attempts))


def next_turn_id() -> TurnId:
    """Return a new turn id of the form ``<epoch-ms>:<seq>``."""
    return TurnId(f"{int(time.time() * 1000)}:{next(_turns)}")


def new_message_id() -> MessageId:
    """Return a new random message id."""
    return MessageId(f"msg_{uuid.uuid4().hex}")


SESSION_PREFIX: Final = "agent-session:"
"""An agent session's conversation id is ``agent-session:<session id>``; this module owns the
format (nothing else spells it)."""


def session_conversation_id(session_id: str) -> str:
    """The conversation that carries agent session ``session_id``."""
    return f"{SESSION_PREFIX}{session_id}"


def session_id_of(conversation_id: str) -> str | None:
    """The agent session behind ``agent-session:<id>`` conversations (None for chats)."""
    if conversation_id.startswith(SESSION_PREFIX):
        return conversation_id[len(SESSION_PREFIX) :] or None
    return None


def is_session_conversation(conversation_id: str) -> bool:
    return conversation_id.startswith(SESSION_PREFIX)
