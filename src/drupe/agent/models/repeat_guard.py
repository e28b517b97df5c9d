"""``RepeatGuard``: keeps a small base model's answer from looping on a line or the question.

Pure and synchronous. The generator feeds it each text delta; it answers with the text to
emit now and whether to stop generating. The text is cut into segments: lines, and sentences
(ended by ``.``, ``?`` or ``!`` and a space or a line end, which belong to the sentence). A
segment is a *repeat* when its normalised form (lower case, letters and digits only) equals
the question or a segment already emitted, and is at least :data:`MIN_REPEAT_CHARS` long (so
``"Yes."`` twice is not a loop).

While the segment being written could still turn out to be a repeat (it is the start of one),
its text is held back; when it diverges, the held text is released at once, so ordinary text
streams with no delay. The first repeat is dropped (a model that echoes the question first may
still answer it); the second one stops the generation. :meth:`finish` releases whatever is held
when the model stops by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["MIN_REPEAT_CHARS", "RepeatGuard", "normalise"]

MIN_REPEAT_CHARS = 12
_NOT_WORD = re.compile(r"[^0-9a-z]+")
_BOUNDARY = re.compile(r"[.?!]?\n|[.?!]\s")


def normalise(text: str) -> str:
    """Lower case, letters and digits only (so punctuation and spacing never hide a repeat)."""
    return _NOT_WORD.sub("", text.lower())


@dataclass(slots=True)
class RepeatGuard:
    """See the module docstring. One guard per answer."""

    question: str = ""
    seen: set[str] = field(default_factory=set)
    repeats: int = 0
    stopped: bool = False
    _segment: str = ""
    """The segment being written (its text is emitted or held)."""
    _held: str = ""
    """The part of ``_segment`` not emitted yet."""

    def __post_init__(self) -> None:
        for piece in _segments(self.question):
            key = normalise(piece)
            if len(key) >= MIN_REPEAT_CHARS:
                self.seen.add(key)

    def feed(self, delta: str) -> tuple[str, bool]:
        """``(text to emit now, stop generating)`` for the next delta."""
        if self.stopped:
            return "", True
        out: list[str] = []
        rest = delta
        while rest:
            # A sentence end needs the next character: the last one held may be a "." still.
            found = _BOUNDARY.search(self._segment + rest, max(0, len(self._segment) - 1))
            if found is None:
                self._segment += rest
                self._held += rest
                rest = ""
                out.append(self._release_unless_suspect())
                break
            cut = found.end() - len(self._segment)
            self._segment += rest[:cut]
            self._held += rest[:cut]
            rest = rest[cut:]
            out.append(self._close_segment())
            if self.stopped:
                break
        return "".join(out), self.stopped

    def finish(self) -> str:
        """The held text, when the model ended on its own (nothing once stopped)."""
        if self.stopped:
            return ""
        key = normalise(self._segment)
        held, self._held, self._segment = self._held, "", ""
        if len(key) >= MIN_REPEAT_CHARS and key in self.seen:
            return ""
        return held

    def _release_unless_suspect(self) -> str:
        key = normalise(self._segment)
        if key and any(seen.startswith(key) for seen in self.seen):
            return ""
        held, self._held = self._held, ""
        return held

    def _close_segment(self) -> str:
        key = normalise(self._segment)
        held, self._held, self._segment = self._held, "", ""
        if len(key) < MIN_REPEAT_CHARS:
            return held
        if key in self.seen:
            self.repeats += 1
            if self.repeats >= 2:
                self.stopped = True
            return ""
        self.seen.add(key)
        return held


def _segments(text: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for found in _BOUNDARY.finditer(text):
        pieces.append(text[start : found.end()])
        start = found.end()
    pieces.append(text[start:])
    return pieces
