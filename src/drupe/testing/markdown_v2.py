"""Telegram's MarkdownV2 parse, as the fake Bot API needs it: refuse what Telegram refuses.

``parse(text)`` returns the text a Telegram user sees and its entities, or raises
``MarkdownV2Error`` with Telegram's own wording (the Bot API answers 400 "Bad Request: can't
parse entities: ..."). The rules (core.telegram.org/bots/api#markdownv2-style):

* Outside entities, ``_ * [ ] ( ) ~ ` > # + - = | { } . !`` must be escaped with ``\\``; any
  character of code 1..126 may be escaped. ``>`` starts a block quote at a line's start.
* ``*bold*``, ``_italic_``, ``__underline__``, ``~strike~``, ``||spoiler||`` nest properly and
  are closed; ``[text](url)``: in the url, ``)`` and ``\\`` must be escaped.
* ``\\`code\\``` and ````` ```lang\\npre``` `````: inside them, ``\\``` and ``\\`` must be
  escaped.

Offsets are in Python characters (Telegram counts UTF-16 units): enough for tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["Entity", "MarkdownV2Error", "parse"]

RESERVED: Final = frozenset("_*[]()~`>#+-=|{}.!")
_STYLES: Final = {"*": "bold", "_": "italic", "__": "underline", "~": "strikethrough"}
_STYLES_SPOILER: Final = {**_STYLES, "||": "spoiler"}


class MarkdownV2Error(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Entity:
    type: str
    offset: int
    length: int
    extra: str = ""
    """The url of a ``text_link``, the language of a ``pre``."""


def _reserved(char: str) -> MarkdownV2Error:
    return MarkdownV2Error(
        f"Character '{char}' is reserved and must be escaped with the preceding '\\'"
    )


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self.entities: list[Entity] = []
        self.stack: list[tuple[str, int, int]] = []  # marker, output offset, source offset

    def run(self) -> tuple[str, list[Entity]]:
        text, i = self.text, 0
        while i < len(text):
            char = text[i]
            if char == "\\":
                if i + 1 >= len(text) or not 0 < ord(text[i + 1]) < 127:
                    raise _reserved("\\")
                self.out.append(text[i + 1])
                i += 2
            elif char == "`":
                i = self._code(i)
            elif char in "*_~|":
                i = self._style(i)
            elif char == "[":
                self.stack.append(("[", len(self.out), i))
                i += 1
            elif char == "]":
                i = self._link(i)
            elif char == ">" and (i == 0 or text[i - 1] == "\n"):
                i += 1  # a block quote line
            elif char in RESERVED:
                raise _reserved(char)
            else:
                self.out.append(char)
                i += 1
        if self.stack:
            start = len(self.text[: self.stack[-1][2]].encode())
            raise MarkdownV2Error(f"Can't find end of the entity starting at byte offset {start}")
        return "".join(self.out), sorted(self.entities, key=lambda e: e.offset)

    def _style(self, i: int) -> int:
        text = self.text
        marker = text[i : i + 2] if text[i : i + 2] in ("__", "||") else text[i]
        if marker == "|":
            raise _reserved("|")
        if self.stack and self.stack[-1][0] == marker:
            _, start, _ = self.stack.pop()
            if len(self.out) > start:
                self.entities.append(Entity(_STYLES_SPOILER[marker], start, len(self.out) - start))
        elif any(m == marker for m, _, _ in self.stack):
            raise MarkdownV2Error(f"Can't parse entities: unexpected end of {marker} entity")
        else:
            self.stack.append((marker, len(self.out), i))
        return i + len(marker)

    def _link(self, i: int) -> int:
        text = self.text
        if not self.stack or self.stack[-1][0] != "[":
            raise _reserved("]")
        if text[i + 1 : i + 2] != "(":
            raise _reserved("]")
        _, start, _ = self.stack.pop()
        url: list[str] = []
        j = i + 2
        while j < len(text) and text[j] != ")":
            if text[j] == "\\" and j + 1 < len(text):
                j += 1
            url.append(text[j])
            j += 1
        if j >= len(text):
            raise MarkdownV2Error("Can't find end of a URL")
        self.entities.append(Entity("text_link", start, len(self.out) - start, "".join(url)))
        return j + 1

    def _code(self, i: int) -> int:
        text = self.text
        pre = text.startswith("```", i)
        j = i + 3 if pre else i + 1
        language = ""
        if pre:
            newline = text.find("\n", j)
            head = text[j:newline] if newline >= 0 else ""
            if newline >= 0 and " " not in head and "`" not in head:
                language, j = head, newline + 1  # the first line names the language (or none)
        start = len(self.out)
        while True:
            if j >= len(text):
                kind = "Pre" if pre else "Code"
                raise MarkdownV2Error(f"Can't find end of {kind} entity at byte offset {i}")
            if text[j] == "\\" and j + 1 < len(text):
                self.out.append(text[j + 1])
                j += 2
            elif pre and text.startswith("```", j):
                j += 3
                break
            elif text[j] == "`":
                if pre:
                    raise _reserved("`")
                j += 1
                break
            else:
                self.out.append(text[j])
                j += 1
        self.entities.append(
            Entity("pre" if pre else "code", start, len(self.out) - start, language)
        )
        return j


def parse(text: str) -> tuple[str, list[Entity]]:
    """What a user sees of ``text`` sent with ``parse_mode=MarkdownV2``, and its entities."""
    return _Parser(text).run()
