"""Pure text shaping for IM channels: secret redaction, platform splits, live previews.

* ``redact(text, secrets)`` replaces API-key shapes (PEM private keys, ``AKIA...``, AWS secret
  values, ``Bearer`` tokens, ``key=value`` credentials, ``ghp_``, ``sk-ant-``, ``sk-``/``sk-proj-``,
  long SSH key bodies) and every configured secret (tokens, signing secrets) with
  ``[REDACTED]``. A trailing fragment that could still grow into a pattern is kept: redaction
  runs on the whole accumulated text at every update.
* ``split_message(text, limit)`` cuts text longer than ``limit`` at the last paragraph break,
  else newline, else space at or before the limit, else a hard cut that never splits a surrogate
  pair. A cut inside a fenced code block closes the fence at the end of the piece and reopens it
  (same info string) at the start of the next, so each piece renders on its own. Every piece is
  at most ``limit`` characters; joined, the pieces hold the whole text.
* ``preview(text, limit)`` is the live-edit form: the text, or its head with an ellipsis when it
  is longer than the limit (the final answer is split instead).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = [
    "REDACTED",
    "STOPPED_SUFFIX",
    "error_text",
    "preview",
    "redact",
    "split_message",
    "stopped_text",
]

REDACTED: Final = "[REDACTED]"
STOPPED_SUFFIX: Final = "_(stopped)_"
_MIN_SECRET_CHARS: Final = 6

_PATTERNS: Final = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"(?i)(aws_secret_access_key\s*[=:]\s*)[A-Za-z0-9/+=]{40}"),
    re.compile(r"(?i)\bBearer\s+[A-Za-z0-9\-._~+/]{8,}=*"),
    re.compile(
        r"(?i)\b(api_key|api_secret|secret_key|password|passwd|token|access_token|client_secret)"
        r"(\s*[=:]\s*)[\"']?[^\s\"']{16,}"
    ),
    re.compile(r"\bghp_[A-Za-z0-9]{36,}"),
    re.compile(r"\bsk-ant-[A-Za-z0-9\-_]{20,}"),
    re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9\-_]{20,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}"),
    re.compile(r"\bAAAA[0-9A-Za-z+/]{100,}={0,3}"),
)


def _replacement(match: re.Match[str]) -> str:
    groups = match.groups()
    if len(groups) == 1 and groups[0] is not None:  # aws_secret_access_key=
        return f"{groups[0]}{REDACTED}"
    if len(groups) == 2 and groups[0] is not None and groups[1] is not None:  # key=value
        return f"{groups[0]}{groups[1]}{REDACTED}"
    return REDACTED


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secret shapes and the configured ``secrets`` replaced."""
    for secret in secrets:
        if len(secret) >= _MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(_replacement, text)
    return text


def stopped_text(text: str) -> str:
    text = text.rstrip()
    return f"{text}\n\n{STOPPED_SUFFIX}" if text else STOPPED_SUFFIX


def error_text(text: str, message: str | None) -> str:
    line = f"Error: {message or 'Unknown error'}"
    text = text.rstrip()
    return f"{text}\n\n{line}" if text else line


def preview(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return _safe_cut(text, limit - 1) + "…"


_FENCE: Final = re.compile(r"^```([^\n`]*)$", re.MULTILINE)


def _safe_cut(text: str, at: int) -> str:
    if at > 0 and at < len(text) and "\ud800" <= text[at - 1] <= "\udbff":
        at -= 1
    return text[:at]


def _open_fence(text: str) -> str | None:
    """The info string of a code fence left open at the end of ``text`` (None if closed)."""
    info: str | None = None
    for match in _FENCE.finditer(text):
        info = match.group(1) if info is None else None
    return info


def _cut_point(text: str, limit: int, floor: int = 0) -> int:
    window = text[:limit]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep)
        if at > floor:
            return at
    at = limit
    if "\ud800" <= text[at - 1] <= "\udbff":
        at -= 1
    return at


def split_message(text: str, limit: int) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters (see the module contract)."""
    if limit < 32:
        raise ValueError("a platform limit below 32 characters is not supported")
    pieces: list[str] = []
    rest = text
    reopen = ""
    while True:
        rest = reopen + rest
        if len(rest) <= limit:
            pieces.append(rest)
            return [p for p in pieces if p.strip()] or [text[:limit]]
        floor = len(reopen) + 1
        budget = limit
        at = _cut_point(rest, budget, floor)
        head = rest[:at]
        info = _open_fence(head)
        if info is not None:
            closing = "\n```"
            budget = limit - len(closing)
            at = _cut_point(rest, budget, floor)
            head = rest[:at]
            info = _open_fence(head)
        if info is not None:
            pieces.append(head.rstrip("\n") + "\n```")
            reopen = f"```{info}\n"
        else:
            pieces.append(head)
            reopen = ""
        rest = rest[at:].lstrip("\n")
        if not reopen:
            rest = rest.lstrip()
