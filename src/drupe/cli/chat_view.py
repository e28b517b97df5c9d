"""How ``drupe chat`` shows one answer: UI chunks folded into whole lines and one partial line.

Pure and synchronous: :class:`AnswerView` takes the chunks of one answer stream (``feed``) and
returns the :class:`Line` values to print, each a whole line with a kind (``label``, ``text``,
``reasoning``, ``status``, ``error``). The unfinished last line of text is kept apart
(:attr:`AnswerView.partial`): a terminal front end shows it next to the input line and prints
it once it is complete, so what the user types never lands inside the answer.

An answer starts with a ``label`` line naming who speaks (the model), and ends with a
``status`` line: done (with the output tokens when the server reported usage), stopped, or
failed. Tool calls, approvals and errors are status lines too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

__all__ = ["AnswerView", "Line", "LineKind", "status_line"]

LineKind = Literal["label", "text", "reasoning", "status", "error", "user"]
_TOOL_OUTPUT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Line:
    """One whole line for the terminal."""

    kind: LineKind
    text: str


def status_line(text: str) -> Line:
    """A status line (model, steer, stop, ...): not part of any answer's text."""
    return Line("status", text)


@dataclass(slots=True)
class AnswerView:
    """Folds one answer's chunks; see the module docstring."""

    model: str
    """The model expected to answer (the server's ``modelId`` metadata replaces it)."""
    partial: str = ""
    """The current unfinished line of text (or reasoning), not yet printed."""
    partial_kind: LineKind = "text"
    labelled: bool = False
    ended: bool = False
    output_tokens: int | None = None

    def feed(self, chunk: dict[str, Any]) -> list[Line]:
        """The whole lines this chunk completes (the label first, once)."""
        kind = chunk.get("type")
        out: list[Line] = []
        if kind == "text-delta":
            self._label(out)
            self._append(str(chunk.get("delta", "")), "text", out)
        elif kind == "reasoning-delta":
            self._label(out)
            self._append(str(chunk.get("delta", "")), "reasoning", out)
        elif kind in ("text-end", "reasoning-end"):
            self._flush(out)
        elif kind == "message-metadata":
            self._metadata(chunk.get("messageMetadata"))
        elif kind == "tool-input-start":
            self._label(out)
            self._flush(out)
            out.append(status_line(f"tool {chunk.get('toolName')} called"))
        elif kind == "tool-output-available" and chunk.get("preliminary") is not True:
            self._flush(out)
            output = orjson.dumps(chunk.get("output")).decode()
            out.append(status_line(f"tool result: {output[:_TOOL_OUTPUT_CHARS]}"))
        elif kind == "tool-approval-request":
            self._flush(out)
            out.append(status_line("approval requested: answer it in the web UI"))
        elif kind == "error" or kind == "data-error":
            self._label(out)
            self._flush(out)
            text = chunk.get("errorText") or (chunk.get("data") or {}).get("message") or "error"
            out.append(Line("error", f"error: {text}"))
        elif kind == "abort":
            self._flush(out)
            self.ended = True
            out.append(status_line(f"stopped ({self.model})"))
        elif kind == "finish":
            self._metadata(chunk.get("messageMetadata"))
            self._flush(out)
            if not self.ended:
                self.ended = True
                out.append(status_line(self._done()))
        return out

    def close(self) -> list[Line]:
        """The stream ended: the partial line, and a status line if no terminal chunk came."""
        out: list[Line] = []
        self._flush(out)
        if self.labelled and not self.ended:
            self.ended = True
            out.append(status_line(f"answer ended early ({self.model})"))
        return out

    def _done(self) -> str:
        if self.output_tokens:
            return f"done ({self.model}, {self.output_tokens} tokens)"
        return f"done ({self.model})"

    def _metadata(self, metadata: Any) -> None:
        if not isinstance(metadata, dict):
            return
        model = metadata.get("modelId")
        if isinstance(model, str) and model:
            self.model = model
        usage = metadata.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("outputTokens"), int):
            self.output_tokens = usage["outputTokens"]

    def _label(self, out: list[Line]) -> None:
        if not self.labelled:
            self.labelled = True
            out.append(Line("label", self.model))

    def _append(self, delta: str, kind: LineKind, out: list[Line]) -> None:
        if kind != self.partial_kind:
            self._flush(out)
            self.partial_kind = kind
        *whole, rest = (self.partial + delta).split("\n")
        out.extend(Line(kind, line) for line in whole)
        self.partial = rest

    def _flush(self, out: list[Line]) -> None:
        if self.partial:
            out.append(Line(self.partial_kind, self.partial))
            self.partial = ""
