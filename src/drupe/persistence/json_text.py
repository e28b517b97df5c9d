"""JSON text as the database stores it: ``jsonb_safe`` makes serialized JSON fit PostgreSQL.

JSONB cannot hold U+0000 (PostgreSQL text cannot), and a tool output or model text may contain
one: ``jsonb_safe`` turns each escaped ``\\u0000`` into ``\\ufffd`` instead of failing the whole
write. An escaped backslash followed by ``u0000`` (literal text) is left alone. Pure.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["jsonb_safe"]

_JSONB_NUL: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def jsonb_safe(text: str) -> str:
    """Return ``text`` (serialized JSON) with every escaped U+0000 replaced by U+FFFD."""
    if "\\u0000" not in text:
        return text
    return _JSONB_NUL.sub(r"\1\\ufffd", text)
