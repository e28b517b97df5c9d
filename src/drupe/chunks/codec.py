"""JSON codec for UI message stream chunks, and validation of untrusted chunks.

Owns: ``dumps`` / ``loads`` (orjson) and ``validate_chunk``, which checks a value against the
``ai`` v6 chunk schemas (``ui-message-chunks.ts`` of ``ai@6.0.326``: loose objects, so unknown
extra keys pass; unknown chunk types, missing required fields and wrongly typed fields fail).
Validation is never stricter than the SDK would be on a valid chunk and never looser, except that
``data-`` with an empty name is refused.

Must never: validate on the hot path (chunks produced by Drupe itself go straight to ``dumps``),
or mutate a chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from drupe.chunks.types import FINISH_REASONS, Chunk, is_data_type
from drupe.errors import ValidationError

__all__ = ["dumps", "loads", "validate_chunk"]


def dumps(chunk: Chunk) -> bytes:
    """Serialise one chunk to compact JSON bytes (no validation)."""
    return orjson.dumps(chunk)


def loads(data: bytes | str, *, validate: bool = False) -> Chunk:
    """Parse one chunk from JSON.

    Without ``validate`` only the envelope is checked (a JSON object with a string ``type``), which
    is enough for chunks Drupe wrote itself (chunk logs, replays). Pass ``validate=True`` for input
    from outside.
    """
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValidationError(f"chunk is not valid JSON: {exc}") from None
    if validate:
        return validate_chunk(value)
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ValidationError("chunk must be a JSON object with a string 'type'")
    return value


# --- field checks ---------------------------------------------------------------------------

_Check = Callable[[object], str | None]
"""Returns ``None`` when the value is acceptable, else what was expected."""


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_json_value(value: object) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return all(_is_json_value(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v) for k, v in value.items())
    return False


def _string(value: object) -> str | None:
    return None if isinstance(value, str) else "a string"


def _boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else "a boolean"


def _anything(value: object) -> str | None:
    return None if _is_json_value(value) else "a JSON value"


def _json_object(value: object) -> str | None:
    if isinstance(value, dict) and _is_json_value(value):
        return None
    return "a JSON object"


def _provider_metadata(value: object) -> str | None:
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, dict) and _is_json_value(v) for k, v in value.items()
    ):
        return None
    return "an object of objects (provider name -> JSON object)"


def _enum(allowed: frozenset[str]) -> _Check:
    expected = "one of " + ", ".join(repr(a) for a in sorted(allowed))

    def check(value: object) -> str | None:
        return None if isinstance(value, str) and value in allowed else expected

    return check


_finish_reason = _enum(FINISH_REASONS)
_input_encoding = _enum(frozenset(("json", "text")))

# field name -> (required, check)
_Schema = Mapping[str, tuple[bool, _Check]]

_TEXT: Final[_Schema] = {"id": (True, _string), "providerMetadata": (False, _provider_metadata)}
_TEXT_DELTA: Final[_Schema] = {**_TEXT, "delta": (True, _string)}
_TOOL_COMMON: Final[_Schema] = {
    "toolCallId": (True, _string),
    "providerExecuted": (False, _boolean),
    "providerMetadata": (False, _provider_metadata),
    "toolMetadata": (False, _json_object),
    "dynamic": (False, _boolean),
}

_SCHEMAS: Final[Mapping[str, _Schema]] = {
    "start": {"messageId": (False, _string), "messageMetadata": (False, _anything)},
    "start-step": {},
    "finish-step": {},
    "finish": {"finishReason": (False, _finish_reason), "messageMetadata": (False, _anything)},
    "abort": {"reason": (False, _string)},
    "error": {"errorText": (True, _string)},
    "message-metadata": {"messageMetadata": (True, _anything)},
    "text-start": _TEXT,
    "text-delta": _TEXT_DELTA,
    "text-end": _TEXT,
    "reasoning-start": _TEXT,
    "reasoning-delta": _TEXT_DELTA,
    "reasoning-end": _TEXT,
    "tool-input-start": {
        **_TOOL_COMMON,
        "toolName": (True, _string),
        "inputEncoding": (False, _input_encoding),
        "title": (False, _string),
    },
    "tool-input-delta": {"toolCallId": (True, _string), "inputTextDelta": (True, _string)},
    "tool-input-available": {
        **_TOOL_COMMON,
        "toolName": (True, _string),
        "input": (True, _anything),
        "title": (False, _string),
    },
    "tool-input-error": {
        **_TOOL_COMMON,
        "toolName": (True, _string),
        "input": (True, _anything),
        "errorText": (True, _string),
        "title": (False, _string),
    },
    "tool-approval-request": {
        "approvalId": (True, _string),
        "toolCallId": (True, _string),
        "approvalDescriptor": (False, _anything),
        "inputSchemaInput": (False, _anything),
        "signature": (False, _string),
    },
    "tool-output-available": {
        **_TOOL_COMMON,
        "output": (True, _anything),
        "preliminary": (False, _boolean),
    },
    "tool-output-error": {**_TOOL_COMMON, "errorText": (True, _string)},
    "tool-output-denied": {"toolCallId": (True, _string)},
    "source-url": {
        "sourceId": (True, _string),
        "url": (True, _string),
        "title": (False, _string),
        "providerMetadata": (False, _provider_metadata),
    },
    "source-document": {
        "sourceId": (True, _string),
        "mediaType": (True, _string),
        "title": (True, _string),
        "filename": (False, _string),
        "providerMetadata": (False, _provider_metadata),
    },
    "file": {
        "url": (True, _string),
        "mediaType": (True, _string),
        "providerMetadata": (False, _provider_metadata),
    },
}

_DATA_SCHEMA: Final[_Schema] = {
    "id": (False, _string),
    "data": (True, _anything),
    "transient": (False, _boolean),
}


def validate_chunk(obj: object) -> Chunk:
    """Check an untrusted value against the ``ai`` v6 chunk schemas and return it as a chunk.

    Raises ``ValidationError`` naming the problem: not an object, unknown type, missing field or
    wrongly typed field. Optional fields must be absent rather than ``null`` (as in the SDK).
    """
    if not isinstance(obj, dict):
        raise ValidationError(f"chunk must be a JSON object, got {_describe(obj)}")
    chunk_type = obj.get("type")
    if not isinstance(chunk_type, str):
        if "type" not in obj:
            raise ValidationError("chunk is missing field 'type'")
        raise ValidationError(f"chunk field 'type' must be a string, got {_describe(chunk_type)}")
    schema = _SCHEMAS.get(chunk_type)
    if schema is None:
        if not is_data_type(chunk_type):
            raise ValidationError(
                f"unknown chunk type {chunk_type!r} (not in the ai v6 UI message stream set, "
                "and not a 'data-<name>' chunk)"
            )
        schema = _DATA_SCHEMA
    for key in obj:
        if not isinstance(key, str):
            raise ValidationError(f"chunk {chunk_type!r} has a non-string key {key!r}")
    for field, (required, check) in schema.items():
        if field not in obj:
            if required:
                raise ValidationError(f"chunk {chunk_type!r} is missing field {field!r}")
            continue
        value: Any = obj[field]
        expected = check(value)
        if expected is not None:
            raise ValidationError(
                f"chunk {chunk_type!r} field {field!r} must be {expected}, got {_describe(value)}"
            )
    for key, value in obj.items():
        if key not in schema and key != "type" and not _is_json_value(value):
            raise ValidationError(f"chunk {chunk_type!r} field {key!r} is not a JSON value")
    return obj
