"""Condense pip's verbose output into one progress line every few seconds.

Usage: ``pip install -v ... 2>&1 | python3 scripts/pip_progress.py --log FILE [--label TEXT]``

Reads pip's output on stdin, writes all of it to ``--log``, and shows what pip is doing with
the elapsed time: the package being collected, built or installed, and while a C/C++ build
runs (llama.cpp), its ``[step/total]`` counter from ninja or make. On a terminal the line is
redrawn in place every second; otherwise (a log, CI) one line is printed every ``--every``
seconds. Standard library only: it runs before Drupe's virtualenv has anything in it.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")
_MAKE_PERCENT = re.compile(r"^\s*\[\s*(\d+)%\]")
_PHASES = (
    (re.compile(r"^Collecting (\S+)"), "collecting {0}"),
    (re.compile(r"^\s*Downloading (\S+)"), "downloading {0}"),
    (re.compile(r"^\s*Building wheel for (\S+)"), "building {0}"),
    (re.compile(r"^\s*Building editable for (\S+)"), "building {0}"),
    (re.compile(r"^Installing collected packages"), "installing packages"),
    (re.compile(r"^Successfully installed"), "installed"),
)


@dataclass
class Progress:
    """What pip is doing, as far as its output tells."""

    phase: str = "starting pip"
    step: tuple[int, int] | None = None
    percent: int | None = None

    def feed(self, line: str) -> None:
        for pattern, template in _PHASES:
            found = pattern.search(line)
            if found:
                self.phase = template.format(*found.groups())
                self.step = None
                self.percent = None
                return
        found = _STEP.search(line)
        if found:
            self.step = (int(found.group(1)), int(found.group(2)))
            return
        found = _MAKE_PERCENT.search(line)
        if found:
            self.percent = int(found.group(1))

    def render(self, elapsed: float) -> str:
        minutes, seconds = divmod(int(elapsed), 60)
        text = f"{minutes}m{seconds:02d}s  {self.phase}"
        if self.step is not None:
            done, total = self.step
            text += f": compiling, step {done}/{total} ({100 * done // max(total, 1)}%)"
        elif self.percent is not None:
            text += f": compiling, {self.percent}%"
        return text


class Reporter:
    """Prints ``Progress.render`` at most every ``every`` seconds (in place on a terminal)."""

    def __init__(
        self,
        out: TextIO,
        *,
        label: str,
        every: float,
        tty: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.label = label
        self.every = every
        self.tty = tty
        self.clock = clock
        self.started = clock()
        self.last_shown: float | None = None
        self.progress = Progress()
        self._lock = threading.Lock()

    def line(self, line: str) -> None:
        with self._lock:
            self.progress.feed(line)
        self.tick()

    def tick(self) -> None:
        """Show the progress if the last line shown is ``every`` seconds old."""
        now = self.clock()
        if self.last_shown is None or now - self.last_shown >= self.every:
            self.show(now)

    def show(self, now: float) -> None:
        with self._lock:
            self._show(now)

    def _show(self, now: float) -> None:
        self.last_shown = now
        text = f"    {self.label} {self.progress.render(now - self.started)}"
        if self.tty:
            self.out.write("\r\x1b[2K" + text[:200])
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def finish(self) -> None:
        self.show(self.clock())
        if self.tty:
            self.out.write("\n")
            self.out.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", required=True, help="where pip's whole output goes")
    parser.add_argument("--label", default="..", help="printed before each progress line")
    parser.add_argument("--every", type=float, default=None, help="seconds between lines")
    args = parser.parse_args()
    tty = sys.stderr.isatty()
    every = args.every if args.every is not None else (1.0 if tty else 10.0)
    reporter = Reporter(sys.stderr, label=args.label, every=every, tty=tty)
    done = threading.Event()

    def ticker() -> None:  # a long compile step prints nothing for a minute: keep time moving
        while not done.wait(max(every, 0.5)):
            reporter.tick()

    threading.Thread(target=ticker, daemon=True).start()
    with open(args.log, "w", encoding="utf-8", errors="replace") as log:
        for line in sys.stdin:
            log.write(line)
            log.flush()
            reporter.line(line)
    done.set()
    reporter.finish()


if __name__ == "__main__":
    main()
