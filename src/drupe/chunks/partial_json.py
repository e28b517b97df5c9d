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


# --- fixJson: one linear scan; a stack of states, and ``_RULES``: per state and character
# (``_ANY``: any other), the actions ``fix_json`` applies in order, then it closes what is open.

(_ROOT, _FINISH, _STRING, _STRING_ESCAPE, _STRING_UNICODE, _LITERAL, _NUMBER) = range(7)
(_OBJECT_START, _OBJECT_KEY, _OBJECT_AFTER_KEY, _OBJECT_BEFORE_VALUE) = range(7, 11)
(_OBJECT_AFTER_VALUE, _OBJECT_AFTER_COMMA) = range(11, 13)
(_ARRAY_START, _ARRAY_AFTER_VALUE, _ARRAY_AFTER_COMMA) = range(13, 16)
_OBJECT_STATES: Final = frozenset(range(_OBJECT_START, _ARRAY_START))
_ARRAY_STATES: Final = frozenset((_ARRAY_START, _ARRAY_AFTER_VALUE, _ARRAY_AFTER_COMMA))
_AFTER_VALUE_STATES: Final = frozenset((_OBJECT_AFTER_VALUE, _ARRAY_AFTER_VALUE))
_LITERALS: Final = ("true", "false", "null")
_OPENS: Final = {'"': _STRING, "t": _LITERAL, "f": _LITERAL, "n": _LITERAL, "-": _NUMBER}
_OPENS.update({"{": _OBJECT_START, "[": _ARRAY_START, **dict.fromkeys("0123456789", _NUMBER)})

_Actions = tuple[tuple[str, int], ...]
_ANY: Final = ""
_PREFIX: Final = "prefix"  # the key a literal takes while it is still a prefix of one
_KEEP: Final[_Actions] = (("keep", 0),)  # the text up to this character is kept
_CLOSE: Final[_Actions] = (("pop", 0), ("keep", 0))
_END_VALUE: Final[_Actions] = (("pop", 0), ("after", 0))  # the container may take the character


def _to(state: int) -> _Actions:
    return (("swap", state),)


def _value(becomes: int) -> _Actions:  # ``processValueStart``
    return (("value", becomes),)


_RULES: Final[dict[int, dict[str, _Actions]]] = {
    _ROOT: {_ANY: _value(_FINISH)},
    _FINISH: {},
    _STRING: {'"': _CLOSE, "\\": (("push", _STRING_ESCAPE),), _ANY: _KEEP},
    _STRING_ESCAPE: {"u": (("pop", 0), ("digits", 0), ("push", _STRING_UNICODE)), _ANY: _CLOSE},
    _STRING_UNICODE: dict.fromkeys("0123456789abcdefABCDEF", (("hex", 0),)),
    _LITERAL: {_PREFIX: _KEEP, _ANY: _END_VALUE},
    _NUMBER: {**dict.fromkeys("0123456789", _KEEP), **dict.fromkeys("eE-.", ()), _ANY: _END_VALUE},
    _OBJECT_START: {'"': _to(_OBJECT_KEY), "}": _CLOSE},
    _OBJECT_KEY: {'"': _to(_OBJECT_AFTER_KEY)},
    _OBJECT_AFTER_KEY: {":": _to(_OBJECT_BEFORE_VALUE)},
    _OBJECT_BEFORE_VALUE: {_ANY: _value(_OBJECT_AFTER_VALUE)},
    _OBJECT_AFTER_VALUE: {",": _to(_OBJECT_AFTER_COMMA), "}": _CLOSE},
    _OBJECT_AFTER_COMMA: {'"': _to(_OBJECT_KEY)},
    _ARRAY_START: {"]": _CLOSE, _ANY: (("keep", 0), *_value(_ARRAY_AFTER_VALUE))},
    _ARRAY_AFTER_VALUE: {",": _to(_ARRAY_AFTER_COMMA), "]": _CLOSE, _ANY: _KEEP},
    _ARRAY_AFTER_COMMA: {_ANY: _value(_ARRAY_AFTER_VALUE)},
}


def fix_json(text: str) -> str:
    """Close the strings, literals, arrays and objects a partial JSON text left open."""
    stack, last, literal_start, digits = [_ROOT], -1, 0, 0
    for i, char in enumerate(text):
        rules = _RULES[stack[-1]]
        key = char
        if stack[-1] == _LITERAL:
            partial = text[literal_start : i + 1]
            key = _PREFIX if any(lit.startswith(partial) for lit in _LITERALS) else _ANY
        actions = rules[key] if key in rules else rules.get(_ANY, ())
        while actions:  # "hex" and "after" may follow on with more actions
            follow: _Actions = ()
            for op, arg in actions:
                if op == "keep":
                    last = i
                elif op == "swap":
                    stack[-1] = arg
                elif op == "push":
                    stack.append(arg)
                elif op == "pop":
                    stack.pop()
                elif op == "digits":
                    digits = 0
                elif op == "hex":
                    digits += 1
                    follow = _CLOSE if digits == 4 else ()
                elif op == "after" and stack[-1] in _AFTER_VALUE_STATES:
                    follow = _RULES[stack[-1]].get(char, ())  # its comma or its closer only
                elif op == "value" and char in _OPENS:
                    last = last if char == "-" else i
                    literal_start = i if _OPENS[char] == _LITERAL else literal_start
                    stack[-1] = arg
                    stack.append(_OPENS[char])
            actions = follow
    return text[: last + 1] + _closing(stack, text[literal_start:])


def _closing(stack: list[int], literal: str) -> str:
    """What closes every state still open, innermost first (``literal``: the open literal)."""
    out: list[str] = []
    for state in reversed(stack):
        if state == _STRING:
            out.append('"')
        elif state in _OBJECT_STATES or state in _ARRAY_STATES:
            out.append("}" if state in _OBJECT_STATES else "]")
        elif state == _LITERAL:
            whole = next((lit for lit in _LITERALS if lit.startswith(literal)), literal)
            out.append(whole[len(literal) :])
    return "".join(out)
