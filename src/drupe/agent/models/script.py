"""The script vocabulary of the scripted model, and its pure planning.

Owns the events a script is made of (:class:`Text`, :class:`Thinking`, :class:`ToolCall`,
:class:`Echo`, :class:`Fail`, :class:`FailMidStream`, :class:`Pause`: frozen plain data), the
validation of a script, and the pure functions that turn one step plus the request's messages
into the exact sequence of deltas to stream. No I/O, no clock, no state: the model that plays
these plans lives in :mod:`drupe.agent.models.scripted`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, assert_never

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = [
    "Delta",
    "Echo",
    "Event",
    "Fail",
    "FailMidStream",
    "Pause",
    "Planned",
    "Script",
    "Sleep",
    "Step",
    "Text",
    "Thinking",
    "ToolCall",
    "count_words",
    "leading_length",
    "plan_step",
    "turn_step_index",
    "validate_script",
    "words_in_request",
]


# --------------------------------------------------------------------------- script vocabulary


@dataclass(frozen=True, slots=True)
class Text:
    """Answer text, streamed as one delta per word or per ``chunk_chars`` characters."""

    text: str
    chunk_chars: int | None = None


@dataclass(frozen=True, slots=True)
class Thinking:
    """Reasoning text, streamed like :class:`Text` into a thinking part."""

    text: str
    chunk_chars: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call whose JSON arguments stream in ``chunk_chars`` slices."""

    name: str
    args: Mapping[str, Any] | str = field(default_factory=dict)
    tool_call_id: str | None = None
    chunk_chars: int = 8


@dataclass(frozen=True, slots=True)
class Echo:
    """Text made from the request: the last user text, or the last tool result."""

    prefix: str = "You said: "
    source: Literal["user", "tool-result"] = "user"
    chunk_chars: int | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    """An HTTP error raised before the first streamed event (the request itself fails).

    Only allowed at the start of a step (after other :class:`Fail` or :class:`Pause` events).
    ``times=None`` fails every attempt; ``times=N`` fails the first N attempts at the same
    request and then lets the step continue.
    """

    status_code: int
    body: str = "scripted failure"
    retry_after: float | None = None
    times: int | None = None


@dataclass(frozen=True, slots=True)
class FailMidStream:
    """An error raised mid-stream, after the events before it were delivered.

    With a ``status_code`` it is a ``ModelHTTPError`` (``in_stream=True``), as when a provider
    sends an error event; with ``None`` it is a ``ModelConnectionError`` (a dropped stream).
    """

    status_code: int | None = 500
    body: str = "scripted failure mid-stream"


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` before the next event (on top of any ``rate`` pacing)."""

    seconds: float


Event: TypeAlias = Text | Thinking | ToolCall | Echo | Fail | FailMidStream | Pause
Step: TypeAlias = Sequence[Event]
Script: TypeAlias = Sequence[Step]
Sleep: TypeAlias = Callable[[float], Awaitable[None]]


# --------------------------------------------------------------------------- pure planning


@dataclass(frozen=True, slots=True)
class Delta:
    kind: Literal["text", "thinking", "tool"]
    part: int
    content: str
    tool_name: str | None = None
    tool_call_id: str | None = None


Planned: TypeAlias = Delta | Pause | FailMidStream


def turn_step_index(messages: Sequence[ModelMessage]) -> int:
    """How many model responses follow the last user prompt: the step this request is."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            count += 1
        elif any(isinstance(part, UserPromptPart) for part in message.parts):
            break
    return count


def _last_user_text(messages: Sequence[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    return _user_text(part)
    return ""


def _last_tool_result(messages: Sequence[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, ToolReturnPart):
                    return part.model_response_str()
    return ""


def _split(text: str, chunk_chars: int | None) -> Iterator[str]:
    """The pieces of ``text``: ``chunk_chars`` characters each, or one word each (a word with
    the whitespace before the next one). Lazy: a long answer holds no list of its pieces."""
    if not text:
        return
    if chunk_chars:
        for i in range(0, len(text), chunk_chars):
            yield text[i : i + chunk_chars]
        return
    start = 0
    in_space = False
    for i, char in enumerate(text):
        if char.isspace():
            in_space = True
        elif in_space:
            yield text[start:i]
            start, in_space = i, False
    yield text[start:]


def plan_step(step: Step, messages: Sequence[ModelMessage], step_index: int) -> Iterator[Planned]:
    """The deltas, pauses and mid-stream failure of one step, after its leading failures.

    Lazy: each delta is made when the stream reaches it, so a live answer holds the step's
    script (shared by every turn on the model id) and a cursor, not one object per word (the
    plan was ~130-190 bytes per word, a few hundred KiB for a long scripted answer). An
    ``Echo`` reads ``messages`` when the stream reaches it."""
    for part, event in enumerate(step):
        if part < leading_length(step):
            continue  # leading pauses and failures run when the request opens
        match event:
            case Fail():
                raise AssertionError("validated: Fail only leads a step")
            case Pause() | FailMidStream():
                yield event
            case Text(text=text, chunk_chars=chunk):
                for piece in _split(text, chunk):
                    yield Delta("text", part, piece)
            case Thinking(text=text, chunk_chars=chunk):
                for piece in _split(text, chunk):
                    yield Delta("thinking", part, piece)
            case Echo(prefix=prefix, source=source, chunk_chars=chunk):
                body = (
                    _last_user_text(messages) if source == "user" else _last_tool_result(messages)
                )
                for piece in _split(prefix + body, chunk):
                    yield Delta("text", part, piece)
            case ToolCall(name=name, args=args, tool_call_id=call_id, chunk_chars=chunk):
                raw = args if isinstance(args, str) else json.dumps(dict(args))
                call_id = call_id or f"call_{step_index}_{part}"
                pieces = _split(raw, chunk)
                yield Delta("tool", part, next(pieces, ""), name, call_id)
                for piece in pieces:
                    yield Delta("tool", part, piece)
            case _:
                assert_never(event)


def leading_length(step: Step) -> int:
    """How many events at the start of ``step`` are pauses and failures."""
    for index, event in enumerate(step):
        if not isinstance(event, Pause | Fail):
            return index
    return len(step)


def validate_script(script: Script) -> tuple[tuple[Event, ...], ...]:
    if not script:
        raise ValueError("a script needs at least one step")
    steps: list[tuple[Event, ...]] = []
    for number, step in enumerate(script):
        events = tuple(step)
        leading = True
        for event in events:
            if isinstance(event, Fail):
                if not leading:
                    raise ValueError(
                        f"step {number}: Fail must come before any content; "
                        "use FailMidStream for an error after the first chunk"
                    )
            elif not isinstance(event, Pause):
                leading = False
        steps.append(events)
    return tuple(steps)


def count_words(text: str, after_space: bool) -> tuple[int, bool]:
    """Word starts in ``text``, given whether the text before it ended in whitespace."""
    words = 0
    for char in text:
        if char.isspace():
            after_space = True
        elif after_space:
            words += 1
            after_space = False
    return words, after_space


def _user_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return " ".join(item for item in part.content if isinstance(item, str))


def words_in_request(messages: Sequence[ModelMessage]) -> int:
    """Deterministic input usage: the words of every text the request carries."""
    texts: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                texts.append(_user_text(part))
            elif isinstance(part, ToolReturnPart):
                texts.append(part.model_response_str())
            elif isinstance(part, SystemPromptPart | TextPart | ThinkingPart):
                texts.append(part.content)
    return sum(len(text.split()) for text in texts)
