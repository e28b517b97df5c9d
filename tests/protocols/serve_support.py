"""``drupe serve`` as a real child process on a free port (tests only)."""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc


@asynccontextmanager
async def drupe_serve(data: Path, config: Path) -> AsyncIterator[tuple[str, anyio.abc.Process]]:
    """Yield ``(url, process)``; SIGINT and wait on exit (unless the test killed it)."""
    command = [sys.executable, "-m", "drupe", "serve", "--port", "0", "--data-dir", str(data),
               "--config", str(config), "--no-auth"]  # fmt: skip
    async with await anyio.open_process(command) as process:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(40):
            while b"\n" not in line:
                line += await process.stdout.receive(1)
        text = line.decode()
        assert "Open http://127.0.0.1:" in text, text
        try:
            yield text.split("Open ", 1)[1].strip(), process
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
                with anyio.move_on_after(20):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
