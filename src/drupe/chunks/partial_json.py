"""Parse the partial JSON of a streaming tool input, exactly as the AI SDK does.

Owns: ports of ``parsePartialJson`` (``ai/src/util/parse-partial-json.ts``), ``fixJson``
(``ai/src/util/fix-json.ts``) and the ``secureJsonParse`` prototype-key guard
(``@ai-sdk/provider-utils``), so a tool part's ``input`` while ``input-streaming`` is the same
value the SDK shows. ``JSON.parse`` semantics are kept where Python differs: ``NaN`` /
``Infinity`` are refused and integers beyond 2**53 become floats.

Must never: raise on malformed input (an unparsable text yields ``UNDEFINED``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["UNDEFINED", "fix_json", "parse_partial_json"]


class _Undefined:
    """JavaScript's ``undefined``: a value that is left out of the JSON."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Final[Any] = _Undefined()
"""Marker for JavaScript ``undefined`` (a key that is absent from the resulting JSON)."""

_MAX_SAFE_INT: Final = 2**53


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _js_int(text: str) -> int | float:
    value = int(text)
    return value if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT else float(text)


_SUSPECT_PROTO: Final = re.compile(
    r'"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])'
    r'(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:'
)
_SUSPECT_CONSTRUCTOR: Final = re.compile(
    r'"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)'
    r'(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"\s*:'
)


def _has_forbidden_keys(root: Any) -> bool:
    pending: list[Any] = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if "__proto__" in node:
                return True
            ctor = node.get("constructor")
            if isinstance(ctor, dict) and "prototype" in ctor:
                return True
            pending.extend(v for v in node.values() if isinstance(v, dict | list) and v)
        else:
            pending.extend(v for v in node if isinstance(v, dict | list) and v)
    return False


def _secure_parse(text: str) -> tuple[bool, Any]:
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_int=_js_int)
    except ValueError:
        return False, UNDEFINED
    if (
        isinstance(value, dict | list)
        and (_SUSPECT_PROTO.search(text) or _SUSPECT_CONSTRUCTOR.search(text))
        and _has_forbidden_keys(value)
    ):
        return False, UNDEFINED
    return True, value


def parse_partial_json(text: str | None) -> Any:
    """Parse ``text``; when that fails, parse its repaired form; else return ``UNDEFINED``."""
    if text is None:
        return UNDEFINED
    ok, value = _secure_parse(text)
    if ok:
        return value
    ok, value = _secure_parse(fix_json(text))
    return value if ok else UNDEFINED


# --- fixJson: a single linear scan that closes whatever the partial JSON left open ----------

_ROOT = 0
_FINISH = 1
_STRING = 2
_STRING_ESCAPE = 3
_STRING_UNICODE = 4
_LITERAL = 5
_NUMBER = 6
_OBJECT_START = 7
_OBJECT_KEY = 8
_OBJECT_AFTER_KEY = 9
_OBJECT_BEFORE_VALUE = 10
_OBJECT_AFTER_VALUE = 11
_OBJECT_AFTER_COMMA = 12
_ARRAY_START = 13
_ARRAY_AFTER_VALUE = 14
_ARRAY_AFTER_COMMA = 15

_OBJECT_STATES: Final = frozenset(
    (
        _OBJECT_KEY,
        _OBJECT_AFTER_KEY,
        _OBJECT_AFTER_COMMA,
        _OBJECT_START,
        _OBJECT_BEFORE_VALUE,
        _OBJECT_AFTER_VALUE,
    )
)
_ARRAY_STATES: Final = frozenset((_ARRAY_START, _ARRAY_AFTER_COMMA, _ARRAY_AFTER_VALUE))
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_DIGITS: Final = frozenset("0123456789")
_LITERALS: Final = ("true", "false", "null")


def fix_json(text: str) -> str:
    """Close the strings, literals, arrays and objects a partial JSON text left open."""
    stack = [_ROOT]
    last_valid = -1
    literal_start = 0
    unicode_digits = 0

    def value_start(char: str, i: int, swap: int) -> None:
        nonlocal last_valid, literal_start
        if char == '"':
            last_valid = i
            stack[-1] = swap
            stack.append(_STRING)
        elif char in "ftn":
            last_valid = i
            literal_start = i
            stack[-1] = swap
            stack.append(_LITERAL)
        elif char == "-":
            stack[-1] = swap
            stack.append(_NUMBER)
        elif char in _DIGITS:
            last_valid = i
            stack[-1] = swap
            stack.append(_NUMBER)
        elif char == "{":
            last_valid = i
            stack[-1] = swap
            stack.append(_OBJECT_START)
        elif char == "[":
            last_valid = i
            stack[-1] = swap
            stack.append(_ARRAY_START)

    def after_object_value(char: str, i: int) -> None:
        nonlocal last_valid
        if char == ",":
            stack[-1] = _OBJECT_AFTER_COMMA
        elif char == "}":
            last_valid = i
            stack.pop()

    def after_array_value(char: str, i: int) -> None:
        nonlocal last_valid
        if char == ",":
            stack[-1] = _ARRAY_AFTER_COMMA
        elif char == "]":
            last_valid = i
            stack.pop()

    for i, char in enumerate(text):
        state = stack[-1]
        if state == _ROOT:
            value_start(char, i, _FINISH)
        elif state == _OBJECT_START:
            if char == '"':
                stack[-1] = _OBJECT_KEY
            elif char == "}":
                last_valid = i
                stack.pop()
        elif state == _OBJECT_AFTER_COMMA:
            if char == '"':
                stack[-1] = _OBJECT_KEY
        elif state == _OBJECT_KEY:
            if char == '"':
                stack[-1] = _OBJECT_AFTER_KEY
        elif state == _OBJECT_AFTER_KEY:
            if char == ":":
                stack[-1] = _OBJECT_BEFORE_VALUE
        elif state == _OBJECT_BEFORE_VALUE:
            value_start(char, i, _OBJECT_AFTER_VALUE)
        elif state == _OBJECT_AFTER_VALUE:
            after_object_value(char, i)
        elif state == _STRING:
            if char == '"':
                stack.pop()
                last_valid = i
            elif char == "\\":
                stack.append(_STRING_ESCAPE)
            else:
                last_valid = i
        elif state == _ARRAY_START:
            if char == "]":
                last_valid = i
                stack.pop()
            else:
                last_valid = i
                value_start(char, i, _ARRAY_AFTER_VALUE)
        elif state == _ARRAY_AFTER_VALUE:
            if char == ",":
                stack[-1] = _ARRAY_AFTER_COMMA
            elif char == "]":
                last_valid = i
                stack.pop()
            else:
                last_valid = i
        elif state == _ARRAY_AFTER_COMMA:
            value_start(char, i, _ARRAY_AFTER_VALUE)
        elif state == _STRING_ESCAPE:
            stack.pop()
            if char == "u":
                unicode_digits = 0
                stack.append(_STRING_UNICODE)
            else:
                last_valid = i
        elif state == _STRING_UNICODE:
            if char in _HEX:
                unicode_digits += 1
                if unicode_digits == 4:
                    stack.pop()
                    last_valid = i
        elif state == _NUMBER:
            if char in _DIGITS:
                last_valid = i
            elif char in "eE-.":
                pass
            elif char == ",":
                stack.pop()
                if stack[-1] == _ARRAY_AFTER_VALUE:
                    after_array_value(char, i)
                if stack[-1] == _OBJECT_AFTER_VALUE:
                    after_object_value(char, i)
            elif char == "}":
                stack.pop()
                if stack[-1] == _OBJECT_AFTER_VALUE:
                    after_object_value(char, i)
            elif char == "]":
                stack.pop()
                if stack[-1] == _ARRAY_AFTER_VALUE:
                    after_array_value(char, i)
            else:
                stack.pop()
        elif state == _LITERAL:
            partial = text[literal_start : i + 1]
            if not any(lit.startswith(partial) for lit in _LITERALS):
                stack.pop()
                if stack[-1] == _OBJECT_AFTER_VALUE:
                    after_object_value(char, i)
                elif stack[-1] == _ARRAY_AFTER_VALUE:
                    after_array_value(char, i)
            else:
                last_valid = i

    result = [text[: last_valid + 1]]
    for state in reversed(stack):
        if state == _STRING:
            result.append('"')
        elif state in _OBJECT_STATES:
            result.append("}")
        elif state in _ARRAY_STATES:
            result.append("]")
        elif state == _LITERAL:
            partial = text[literal_start:]
            for lit in _LITERALS:
                if lit.startswith(partial):
                    result.append(lit[len(partial) :])
                    break
    return "".join(result)
