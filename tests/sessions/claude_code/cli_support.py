"""Helpers for the end-to-end tests that run the REAL bundled Claude Code CLI.

``isolated_config`` gives the driver a throwaway ``HOME``/``CLAUDE_CONFIG_DIR``/
``CLAUDE_CODE_TMPDIR`` under the test's tmp dir and points ``ANTHROPIC_BASE_URL`` at the fake
API on loopback. ``EventReader`` reads one connection's runtime events with a deadline, so a
test never sleeps waiting for something to happen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio

from drupe.chunks.accumulate import accumulate
from drupe.chunks.codec import validate_chunk
from drupe.chunks.types import Chunk, UIMessage
from drupe.sessions.drivers.base import (
    ChunkEvent,
    ConnectInput,
    ErrorEvent,
    RuntimeEvent,
    SessionInfo,
    TurnComplete,
    UserInput,
)
from drupe.sessions.drivers.claude_code import ClaudeCodeConfig, ClaudeCodeConnection

__all__ = ["EventReader", "chunks_of", "connect_input", "isolated_config", "message_of", "said"]

MODEL = "claude-sonnet-4-5"
DEADLINE_S = 30.0


def isolated_config(tmp_path: Path, base_url: str) -> ClaudeCodeConfig:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (tmp_path / "cctmp").mkdir(exist_ok=True)
    env = {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CLAUDE_CODE_TMPDIR": str(tmp_path / "cctmp"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    return ClaudeCodeConfig(env=env, claude_code_prompt=False)


def connect_input(
    tmp_path: Path, *, resume_token: str | None = None, instructions: str | None = None
) -> ConnectInput:
    session = SessionInfo(
        session_id="s1",
        agent_id="a1",
        agent_name="coder",
        driver_type="claude-code",
        model_id=MODEL,
        instructions=instructions,
        workspace=tmp_path / "workspace",
    )
    return ConnectInput(session=session, model_id=MODEL, resume_token=resume_token)


def said(text: str, *, headless: bool = False, reminder: bool = False) -> UserInput:
    message: Any = {"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}
    return UserInput(message=message, headless=headless, system_reminder=reminder)


def chunks_of(events: list[RuntimeEvent]) -> list[Chunk]:
    return [validate_chunk(e.chunk) for e in events if isinstance(e, ChunkEvent)]


def message_of(chunks: list[Chunk]) -> UIMessage:
    """The UI message a subscriber rebuilds (the host frames a turn with start/finish)."""
    return accumulate([{"type": "start", "messageId": "m"}, *chunks, {"type": "finish"}])


class EventReader:
    """Reads a connection's events (one iterator for the connection's life)."""

    def __init__(self, connection: ClaudeCodeConnection) -> None:
        self.connection = connection
        self._events: AsyncIterator[RuntimeEvent] | None = None

    async def __aenter__(self) -> EventReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._events is not None:
            async with aclosing(self._events):  # type: ignore[type-var]
                pass

    async def next(self) -> RuntimeEvent:
        if self._events is None:
            self._events = self.connection.events()
        with anyio.fail_after(DEADLINE_S):
            return await anext(self._events)

    async def until(self, *types: type) -> list[RuntimeEvent]:
        """Events up to and including the first one of ``types``."""
        out: list[RuntimeEvent] = []
        while True:
            event = await self.next()
            out.append(event)
            if isinstance(event, types):
                return out

    async def turn(self) -> list[RuntimeEvent]:
        return await self.until(TurnComplete, ErrorEvent)

    async def rest(self) -> list[RuntimeEvent]:
        """Every event until the stream ends."""
        out: list[RuntimeEvent] = []
        if self._events is None:
            self._events = self.connection.events()
        with anyio.fail_after(DEADLINE_S):
            async for event in self._events:
                out.append(event)
        return out
