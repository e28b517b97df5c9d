"""``drupe chat`` in a real pseudo-terminal against a real ``drupe serve`` (scripted models).

pexpect runs the client in a pty; pyte, a terminal emulator, renders what it writes, so the
assertions read the screen a user would see: who speaks, the answer text whole on its lines,
the text typed during a streaming answer only on its own input line, and the status lines.
"""

from __future__ import annotations

import os
import sys
import time

import httpx
import pexpect
import pyte
import pytest

# Each test drives a real client process for a few seconds of paced answers, after the module's
# server has started (slow on a busy 2-core machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

COLUMNS = 400  # wide enough that no line of these answers wraps
ROWS = 120
WAIT_SECONDS = 40.0


class Tty:
    """A ``drupe chat`` process in a pty, and the screen it draws."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "NO_COLOR": "1"}
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "drupe", "chat", *args],
            env=env,
            dimensions=(ROWS, COLUMNS),
            encoding="utf-8",
        )
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.Stream(self.screen)

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def wait_for(self, predicate: str, count: int = 1) -> list[str]:
        """Read the pty until ``predicate`` shows on ``count`` screen lines (or fail)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while sum(predicate in line for line in self.lines()) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{predicate!r} never showed:\n" + "\n".join(self.lines())
            try:
                self.stream.feed(self.child.read_nonblocking(65536, timeout=remaining))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                assert sum(predicate in line for line in self.lines()) >= count, (
                    f"exited before {predicate!r}:\n" + "\n".join(self.lines())
                )
        return self.lines()

    def close(self) -> None:
        self.child.close(force=True)


def answer_texts(served: str, conversation_id: str) -> list[str]:
    messages = httpx.get(f"{served}/api/conversations/{conversation_id}", timeout=20).json()
    return [
        "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text")
        for m in messages["messages"]
        if m["role"] == "assistant"
    ]


def test_typing_during_an_answer_stays_on_the_input_line(served: str) -> None:
    model = "scripted:lorem?words=40&rate=12"
    tty = Tty("c-pty", "--url", served, "--model", model)
    try:
        tty.wait_for(f"· model: {model}")
        tty.wait_for("you ▸")
        tty.child.send("first question\r")
        tty.wait_for(f"{model} ▸")  # the label: the answer has started
        typed = "typed while it streams"
        tty.child.send(typed)
        tty.wait_for(typed)  # echoed on the input line while the answer streams
        tty.child.send("\r")
        tty.wait_for("· steer queued: answered after the running turn")
        screen = tty.wait_for(f"· done ({model}, 40 tokens)", count=2)
        tty.child.send("/quit\r")
        tty.child.expect(pexpect.EOF, timeout=WAIT_SECONDS)
    finally:
        tty.close()

    first, second = answer_texts(served, "c-pty")
    assert len(first.split()) == 40 and len(second.split()) == 40
    # Each answer sits whole on one line, exactly as the server stored it, under its label
    # (the first answer is labelled again after the steer line that interrupted it).
    answers = [n for n, line in enumerate(screen) if line.startswith("  ")]
    assert [screen[n] for n in answers] == [f"  {first}", f"  {second}"], "\n".join(screen)
    assert all(screen[n - 1] == f"{model} ▸" for n in answers)
    assert all(screen[n + 1] == f"· done ({model}, 40 tokens)" for n in answers)
    # What was typed shows once, as the user's own line, and inside no answer.
    typed_lines = [line for line in screen if typed in line]
    assert typed_lines == [f"you ▸ {typed}"], "\n".join(screen)
    order = [
        screen.index("you ▸ first question"),
        screen.index(f"you ▸ {typed}"),
        screen.index("· steer queued: answered after the running turn"),
        *answers,
    ]
    assert order == sorted(order)


def test_stop_shows_as_a_status_line(served: str) -> None:
    model = "scripted:lorem?words=400&rate=10"
    tty = Tty("c-pty-stop", "--url", served, "--model", model)
    try:
        tty.wait_for("you ▸")
        tty.child.send("tell me everything\r")
        tty.wait_for(f"{model} ▸")
        tty.child.send("/stop\r")
        tty.wait_for(f"· stopped ({model})")
        # The stop's own answer arrives after the stream's end may have been drawn.
        screen = tty.wait_for("· stop sent")
        tty.child.send("/quit\r")
        tty.child.expect(pexpect.EOF, timeout=WAIT_SECONDS)
    finally:
        tty.close()
    assert "· stop sent" in screen
    (partial,) = answer_texts(served, "c-pty-stop")
    assert 0 < len(partial.split()) < 400
    label = screen.index(f"{model} ▸")
    # The partial answer is on screen as persisted (its unfinished line is printed at the stop).
    assert screen[label + 1] == f"  {partial}".rstrip()
