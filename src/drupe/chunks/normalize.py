"""Pure clean-ups of a final UI message before it is persisted (the persistence listener's step 4).

Owns: ``finalize_interrupted_parts`` (open tool parts become ``output-error``, streaming text and
reasoning become ``done``), ``strip_empty_parts``, ``drop_transient_parts`` and
``append_error_part`` (exactly one ``data-error`` part). See cherry-runtime.md §3.4.

Must never: mutate its input. Every function returns a new message dict with a new ``parts`` list;
parts it changes are new dicts, parts it leaves alone are shared (treat messages as immutable).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from drupe.chunks.tool_parts import is_tool_part
from drupe.chunks.types import UIMessage, UIPart

__all__ = [
    "INTERRUPTED_ERROR_TEXT",
    "TERMINAL_TOOL_STATES",
    "append_error_part",
    "drop_transient_parts",
    "finalize_interrupted_parts",
    "is_tool_part",
    "strip_empty_parts",
]

TERMINAL_TOOL_STATES: Final = frozenset(("output-available", "output-error", "output-denied"))
"""Tool part states a tool call ends in (a ``preliminary`` output is not an end)."""

INTERRUPTED_ERROR_TEXT: Final[dict[str, str]] = {
    "paused": "Interrupted by user",
    "error": "Stream errored before tool completed",
}
"""``errorText`` given to a tool part left open by a stop (``paused``) or a failure (``error``)."""


def _with_parts(message: UIMessage, parts: Iterable[UIPart]) -> UIMessage:
    result = dict(message)
    result["parts"] = list(parts)
    return result  # type: ignore[return-value]


def _finalize_part(part: UIPart, error_text: str) -> UIPart:
    if is_tool_part(part):
        state = part.get("state")
        if state in TERMINAL_TOOL_STATES and not (
            state == "output-available" and part.get("preliminary") is True
        ):
            return part
        closed = {k: v for k, v in part.items() if k not in ("output", "preliminary")}
        closed["state"] = "output-error"
        closed["errorText"] = error_text
        return closed
    if part.get("type") in ("text", "reasoning") and part.get("state") == "streaming":
        return {**part, "state": "done"}
    return part


def finalize_interrupted_parts(message: UIMessage, status: Literal["paused", "error"]) -> UIMessage:
    """Close every part a stopped or failed stream left open.

    A tool part that has not reached ``output-available`` (final, not ``preliminary``),
    ``output-error`` or ``output-denied`` becomes ``output-error`` with ``"Interrupted by user"``
    (paused) or ``"Stream errored before tool completed"`` (error); its input and approval are
    kept, a preliminary output is dropped. A ``streaming`` text or reasoning part becomes ``done``.
    """
    error_text = INTERRUPTED_ERROR_TEXT[status]
    return _with_parts(message, (_finalize_part(p, error_text) for p in message["parts"]))


def _is_empty_text(part: UIPart) -> bool:
    if part.get("type") not in ("text", "reasoning"):
        return False
    text = part.get("text")
    return not isinstance(text, str) or not text.strip()


def strip_empty_parts(message: UIMessage) -> UIMessage:
    """Drop text and reasoning parts whose text is empty or only whitespace."""
    return _with_parts(message, (p for p in message["parts"] if not _is_empty_text(p)))


def drop_transient_parts(
    message: UIMessage, names: Iterable[str] = frozenset(("data-retry",))
) -> UIMessage:
    """Drop parts whose ``type`` is in ``names`` (by default the never-persisted ``data-retry``)."""
    dropped = frozenset(names)
    return _with_parts(message, (p for p in message["parts"] if p.get("type") not in dropped))


def append_error_part(message: UIMessage, error: Mapping[str, Any]) -> UIMessage:
    """Give the message exactly one ``data-error`` part, ``{"type": "data-error", "data": error}``.

    An existing ``data-error`` part is replaced in place (the first one; any others are dropped);
    otherwise the part is appended.
    """
    error_part: UIPart = {"type": "data-error", "data": dict(error)}
    parts: list[UIPart] = []
    placed = False
    for part in message["parts"]:
        if part.get("type") == "data-error":
            if not placed:
                parts.append(error_part)
                placed = True
            continue
        parts.append(part)
    if not placed:
        parts.append(error_part)
    return _with_parts(message, parts)
