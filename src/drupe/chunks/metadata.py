"""Deep merge of message metadata, exactly as the AI SDK's ``mergeObjects`` does it.

Owns: ``merge_objects`` (port of ``ai/src/util/merge-objects.ts``): nested objects merge key by
key, arrays and primitives are replaced, ``__proto__`` / ``constructor`` / ``prototype`` keys are
skipped, and neither input is mutated (unchanged values are shared, never copied). The JavaScript
object-spread quirks for non-object values are kept (spreading an array gives index keys; a
primitive base that would be searched with ``in`` is a ``TypeError``, raised here as
``MetadataMergeError``).

Must never: mutate its inputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from drupe.chunks.partial_json import UNDEFINED

__all__ = ["MetadataMergeError", "merge_objects"]

_SKIPPED: Final = frozenset(("__proto__", "constructor", "prototype"))


class MetadataMergeError(TypeError):
    """The SDK would throw a ``TypeError`` while merging these values."""


def _spread(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list | str):
        return {str(i): item for i, item in enumerate(value)}
    return {}


def _own_entries(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        yield from value.items()
    elif isinstance(value, list | str):
        for i, item in enumerate(value):
            yield str(i), item


def _lookup(base: Any, key: str) -> Any:
    """``key in base ? base[key] : undefined`` with JavaScript's rules for the ``in`` operator."""
    if isinstance(base, dict):
        return base.get(key, UNDEFINED)
    if isinstance(base, list):
        if key.isdigit() and int(key) < len(base) and str(int(key)) == key:
            return base[int(key)]
        return len(base) if key == "length" else UNDEFINED
    raise MetadataMergeError(
        f"cannot use 'in' operator to search for {key!r} in a {type(base).__name__} "
        "(message metadata must be an object to be merged into)"
    )


def merge_objects(base: Any, overrides: Any) -> Any:
    """Deep-merge ``overrides`` into a copy of ``base``; ``UNDEFINED`` stands for a missing side."""
    if base is UNDEFINED:
        return overrides
    if overrides is UNDEFINED:
        return base
    result = _spread(base)
    for key, value in _own_entries(overrides):
        if key in _SKIPPED or value is UNDEFINED:
            continue
        base_value = _lookup(base, key)
        if isinstance(value, dict) and isinstance(base_value, dict):
            result[key] = merge_objects(base_value, value)
        else:
            result[key] = value
    return result
