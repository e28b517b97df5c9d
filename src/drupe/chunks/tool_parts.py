"""Tool parts of a UI message, and the JavaScript value rules the AI SDK port needs.

Owns: ``update_tool_part`` (port of ``updateToolPart`` / ``updateDynamicToolPart`` in
``ai/src/ui/process-ui-message-stream.ts``), the partial tool call state kept while a tool input
streams, and the JavaScript semantics the port relies on (``undefined`` as a missing key,
truthiness, ``??``). Used by ``drupe.chunks.accumulate``.

Must never: mutate anything but the part it is given.
"""

from __future__ import annotations

from typing import Any, Final

from drupe.chunks.partial_json import UNDEFINED
from drupe.chunks.types import UIPart

__all__ = [
    "PartialToolCall",
    "PendingInput",
    "assign",
    "coalesce",
    "is_tool_part",
    "nullish",
    "static_tool_name",
    "truthy",
    "update_tool_part",
]

_RESULT_STATES: Final = frozenset(("output-available", "output-error"))


def truthy(value: Any) -> bool:
    """JavaScript truthiness (empty arrays and objects are truthy)."""
    if value is UNDEFINED or value is None or value is False or value == "":
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == value and value != 0
    return True


def nullish(value: Any) -> bool:
    return value is UNDEFINED or value is None


def coalesce(value: Any, fallback: Any) -> Any:
    """JavaScript ``value ?? fallback``."""
    return fallback if value is UNDEFINED or value is None else value


def assign(target: dict[str, Any], key: str, value: Any) -> None:
    """``target[key] = value`` where ``UNDEFINED`` removes the key (JSON drops it)."""
    if value is UNDEFINED:
        target.pop(key, None)
    else:
        target[key] = value


def is_tool_part(part: UIPart) -> bool:
    """Whether ``part`` is a tool part (``tool-<name>`` or ``dynamic-tool``)."""
    part_type = part.get("type")
    return isinstance(part_type, str) and (
        part_type.startswith("tool-") or part_type == "dynamic-tool"
    )


def static_tool_name(part: UIPart) -> str:
    return str(part["type"]).split("-", 1)[1]


class PartialToolCall:
    __slots__ = ("dynamic", "input_encoding", "pieces", "title", "tool_metadata", "tool_name")

    def __init__(
        self,
        *,
        text: str,
        input_encoding: Any,
        tool_name: Any,
        dynamic: Any,
        title: Any,
        tool_metadata: Any,
    ) -> None:
        self.pieces = [text]
        self.input_encoding = input_encoding
        self.tool_name = tool_name
        self.dynamic = dynamic
        self.title = title
        self.tool_metadata = tool_metadata

    def text(self) -> str:
        if len(self.pieces) > 1:
            self.pieces[:] = ["".join(self.pieces)]
        return self.pieces[0]


class PendingInput:
    """A tool part whose ``input``/``rawInput`` still have to be computed from buffered deltas."""

    __slots__ = ("call", "part", "with_raw")

    def __init__(self, part: UIPart, call: PartialToolCall, with_raw: bool) -> None:
        self.part = part
        self.call = call
        self.with_raw = with_raw


def update_tool_part(part: UIPart | None, dynamic: bool, options: dict[str, Any]) -> UIPart:
    """``updateToolPart`` / ``updateDynamicToolPart``: mutate ``part``, or build a new one.

    ``options`` holds the SDK's options object (a missing key is ``undefined``). Returns ``part``
    itself when given, else the new part, which the caller appends to the message.
    """
    state = options["state"]
    get = options.get
    metadata = get("providerMetadata", UNDEFINED)
    metadata_key = "resultProviderMetadata" if state in _RESULT_STATES else "callProviderMetadata"
    if part is not None:
        part["state"] = state
        if dynamic:
            assign(part, "toolName", options["toolName"])
        else:
            part["type"] = f"tool-{options['toolName']}"
        assign(part, "input", get("input", UNDEFINED))
        assign(part, "output", get("output", UNDEFINED))
        assign(part, "errorText", get("errorText", UNDEFINED))
        assign(part, "rawInput", get("rawInput", UNDEFINED))
        encoding = get("inputEncoding", UNDEFINED)
        if nullish(encoding):
            part.pop("inputEncoding", None)
        else:
            part["inputEncoding"] = encoding
        assign(part, "preliminary", get("preliminary", UNDEFINED))
        if get("title", UNDEFINED) is not UNDEFINED:
            part["title"] = options["title"]
        if get("toolMetadata", UNDEFINED) is not UNDEFINED:
            part["toolMetadata"] = options["toolMetadata"]
        executed = coalesce(
            get("providerExecuted", UNDEFINED), part.get("providerExecuted", UNDEFINED)
        )
        assign(part, "providerExecuted", executed)
        if not nullish(metadata):
            part[metadata_key] = metadata
        return part
    new_part: UIPart = {"type": "dynamic-tool" if dynamic else f"tool-{options['toolName']}"}
    if dynamic:
        assign(new_part, "toolName", options["toolName"])
    new_part["toolCallId"] = options["toolCallId"]
    new_part["state"] = state
    keys = (
        ("input", "output", "errorText", "preliminary", "providerExecuted", "title")
        if dynamic
        else (
            "title",
            "input",
            "output",
            "rawInput",
            "errorText",
            "providerExecuted",
            "preliminary",
        )
    )
    for key in keys:
        assign(new_part, key, get(key, UNDEFINED))
    if get("toolMetadata", UNDEFINED) is not UNDEFINED:
        new_part["toolMetadata"] = options["toolMetadata"]
    if not nullish(get("inputEncoding", UNDEFINED)):
        new_part["inputEncoding"] = options["inputEncoding"]
    if not nullish(metadata):
        new_part[metadata_key] = metadata
    return new_part
