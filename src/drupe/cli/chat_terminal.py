"""The two faces of ``drupe chat``: an interactive terminal, and plain lines for pipes.

:class:`PromptTerminal` (stdin and stdout are a terminal) reads input with prompt_toolkit: the
input line stays at the bottom, whole answer lines are printed above it (Rich styles), the
unfinished line of the streaming answer is shown just above the input line, and a bottom
toolbar says what is going on (which model answers, how to stop). So text typed while an
answer streams never lands inside the answer. :class:`PlainTerminal` (a pipe or a file) reads
lines from stdin in a worker thread and prints whole lines, with no colours.

Both render the :class:`~drupe.cli.chat_view.Line` values of ``drupe.cli.chat_view``: ``who ▸``
labels for the user and the model, answer text indented under its label, ``·`` status lines.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Protocol

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import set_app
from prompt_toolkit.application.run_in_terminal import in_terminal
from prompt_toolkit.formatted_text import FormattedText
from rich.console import Console
from rich.text import Text

from drupe.cli.chat_view import Line, LineKind

__all__ = ["ARROW", "PlainTerminal", "PromptTerminal", "Terminal", "open_terminal", "render_line"]

ARROW = "▸"
_STYLES: dict[LineKind, str] = {
    "label": "bold cyan",
    "user": "bold green",
    "text": "",
    "reasoning": "dim italic",
    "status": "dim",
    "error": "bold red",
}


def render_line(line: Line) -> Text:
    """The Rich text of one line."""
    if line.kind == "label":
        return Text.assemble((line.text, _STYLES["label"]), (f" {ARROW}", "dim"))
    if line.kind == "user":
        return Text.assemble(("you", _STYLES["user"]), (f" {ARROW} ", "dim"), line.text)
    if line.kind == "status":
        return Text(f"· {line.text}", style=_STYLES["status"])
    if line.kind == "error":
        return Text(f"! {line.text}", style=_STYLES["error"])
    return Text(f"  {line.text}", style=_STYLES[line.kind])


class Terminal(Protocol):
    """What the chat client needs from a terminal."""

    async def read_line(self) -> str | None:
        """The next line typed (``None`` at end of input)."""

    async def show(self, lines: Sequence[Line]) -> None:
        """Print whole lines (above the input line, when there is one)."""

    def set_partial(self, text: str) -> None:
        """Show the unfinished line of the streaming answer (``""``: none)."""

    def set_status(self, text: str) -> None:
        """Show what is going on (``""``: nothing)."""


class PlainTerminal:
    """Lines from stdin (a worker thread), whole lines to stdout, no colours."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)

    async def read_line(self) -> str | None:
        try:
            return await anyio.to_thread.run_sync(input, abandon_on_cancel=True)
        except EOFError:
            return None

    async def show(self, lines: Sequence[Line]) -> None:
        for line in lines:
            self.console.print(render_line(line))

    def set_partial(self, text: str) -> None:
        return None

    def set_status(self, text: str) -> None:
        return None


class PromptTerminal:
    """prompt_toolkit input line under Rich output; see the module docstring."""

    def __init__(self) -> None:
        self.console = Console(highlight=False, soft_wrap=True)
        self._partial = ""
        self._status = ""
        self.session: PromptSession[str] = PromptSession(
            self._message, bottom_toolbar=self._toolbar, erase_when_done=True
        )

    def _message(self) -> FormattedText:
        fragments: list[tuple[str, str]] = []
        if self._partial:
            fragments.append(("", f"  {self._partial}\n"))
        fragments.append(("bold ansigreen", "you"))
        fragments.append(("", f" {ARROW} "))
        return FormattedText(fragments)

    def _toolbar(self) -> FormattedText | None:
        return FormattedText([("", f" {self._status}")]) if self._status else None

    async def read_line(self) -> str | None:
        try:
            return await self.session.prompt_async()
        except EOFError:
            return None
        except KeyboardInterrupt:
            return "/quit"

    async def show(self, lines: Sequence[Line]) -> None:
        # Another task may print while the prompt runs: make the prompt's application current
        # so that in_terminal hides it, prints, and draws it again below the new lines.
        with set_app(self.session.app):
            async with in_terminal():
                for line in lines:
                    self.console.print(render_line(line))

    def set_partial(self, text: str) -> None:
        if text != self._partial:
            self._partial = text
            self.session.app.invalidate()

    def set_status(self, text: str) -> None:
        if text != self._status:
            self._status = text
            self.session.app.invalidate()


def open_terminal() -> Terminal:
    """Interactive when stdin and stdout are a terminal, plain lines otherwise."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return PromptTerminal()
    return PlainTerminal()
