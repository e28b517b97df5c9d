"""Request values the gateway's dialects (Chat Completions, Messages, Responses) read alike.

Pure: each function reads a JSON body (or one of its items) and returns Drupe's value, or raises
the error the dialect's ``fail`` builds (a 400 in that dialect's shape) with a message that names
the offending field.

* ``sampling_settings``: the output-token bound and the numeric sampling settings;
* ``tool_call_part``: an assistant's earlier tool call as a UI ``dynamic-tool`` part.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from drupe.chunks.types import UIPart

__all__ = ["Fail", "sampling_settings", "tool_call_part"]

Fail = Callable[[str], Exception]
"""Builds the dialect's 400 error from a message."""


def sampling_settings(
    body: Mapping[str, Any],
    fail: Fail,
    *,
    max_tokens: tuple[str, ...],
    numbers: Iterable[str] = ("temperature", "top_p"),
) -> dict[str, Any]:
    """``max_tokens`` (the first of the ``max_tokens`` keys present) and the float settings
    named in ``numbers``; absent keys are left out."""
    settings: dict[str, Any] = {}
    key = next((k for k in max_tokens if body.get(k) is not None), None)
    if key is not None:
        value = body[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise fail(f"{max_tokens[-1]!r} must be a positive integer")
        settings["max_tokens"] = value
    for name in numbers:
        number = body.get(name)
        if number is None:
            continue
        if not isinstance(number, int | float) or isinstance(number, bool):
            raise fail(f"{name!r} must be a number")
        settings[name] = float(number)
    return settings


def tool_call_part(call_id: str, name: str, raw_arguments: Any, *, bad_json: str) -> UIPart:
    """A tool call the client sends back in its history, as an ``input-available`` part.

    ``raw_arguments`` is a JSON string (or an already decoded value); invalid JSON raises
    ``ValueError(bad_json)`` for the dialect to turn into its 400.
    """
    raw = raw_arguments or "{}"
    try:
        arguments = orjson.loads(raw) if isinstance(raw, str) else raw
    except orjson.JSONDecodeError:
        raise ValueError(bad_json) from None
    return {
        "type": "dynamic-tool",
        "toolName": name,
        "toolCallId": call_id,
        "state": "input-available",
        "input": arguments if isinstance(arguments, dict) else {},
    }
