"""``TurnRun``: the state of one in-process turn, and the pure helpers around it.

Owns the per-turn bookkeeping the connection mutates from its one turn task (the steer queue,
the row segments A1 / A1a + A2 accumulated from the chunks, the usage base of the current row,
the denials the host relays) and pure functions: which stored messages are worth sending, the
history before a message the store already holds, usage rebased onto the current row, and the
serialized form of a turn error. No I/O, no awaiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from drupe.chunks.accumulate import Accumulator
from drupe.chunks.types import Chunk, UIMessage
from drupe.errors import ProviderError
from drupe.sessions.drivers.base import UserInput

__all__ = [
    "TurnRun",
    "history_before",
    "is_text_only",
    "rebase_usage",
    "serialize_error",
    "worth_keeping",
]

_USAGE_KEYS = ("inputTokens", "outputTokens", "totalTokens", "reasoningTokens", "cachedInputTokens")


def is_text_only(user_input: UserInput) -> bool:
    """Whether every part of the input's message is text (a steer must be)."""
    parts = user_input.message.get("parts") or []
    return bool(parts) and all(p.get("type") == "text" for p in parts)


@dataclass(slots=True, eq=False)
class TurnRun:
    """One running turn: its steer queue, its row segments and its cancel scope."""

    user_input: UserInput
    headless: bool
    pending: list[UserInput] = field(default_factory=list)
    ended: bool = False
    completed: bool = False
    """The loop finished the turn normally."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    segments: list[Accumulator] = field(default_factory=list)
    """One accumulated assistant message per row: A1, or A1a then A2 after a boundary."""
    steers: list[list[UIMessage]] = field(default_factory=list)
    """The steer messages injected before each segment after the first."""
    relayed_denials: set[str] = field(default_factory=set)
    """Calls denied through ``respond_approval``: the host emits their ``tool-output-denied``."""
    usage_base: dict[str, int] = field(default_factory=dict)
    last_usage: dict[str, int] = field(default_factory=dict)


def worth_keeping(message: UIMessage) -> bool:
    """Drop empty assistant rows (a pending placeholder saved before the turn ran)."""
    return message.get("role") != "assistant" or bool(message.get("parts"))


def history_before(history: Sequence[UIMessage], message_id: object) -> list[UIMessage]:
    """The history up to (not including) the message ``message_id`` when it is already there.

    The host saves the user row before the connection exists, so a cold connect may load the
    very message it is then sent; it must reach the model once.
    """
    for index, message in enumerate(history):
        if message_id is not None and message.get("id") == message_id:
            return list(history[:index])
    return list(history)


def rebase_usage(run: TurnRun, chunk: Chunk) -> Chunk:
    """Usage metadata counts from the last steer boundary (each row carries its own usage)."""
    metadata = chunk.get("messageMetadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("usage"), dict):
        return chunk
    usage: dict[str, Any] = metadata["usage"]
    run.last_usage = {k: int(v) for k, v in usage.items() if isinstance(v, int)}
    if not run.usage_base:
        return chunk
    rebased = {
        key: value - run.usage_base.get(key, 0) if key in _USAGE_KEYS else value
        for key, value in usage.items()
    }
    return {**chunk, "messageMetadata": {**metadata, "usage": rebased}}


def serialize_error(error: BaseException) -> dict[str, Any]:
    """A turn failure as an ``ErrorEvent`` payload: ``{name, message, statusCode?}``."""
    out: dict[str, Any] = {"name": type(error).__name__, "message": str(error) or repr(error)}
    if isinstance(error, ProviderError) and error.status_code is not None:
        out["statusCode"] = error.status_code
    return out
