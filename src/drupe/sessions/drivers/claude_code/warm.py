"""Warm connections: prewarm a CLI process for an idle session, consume it on the next connect.

Owns ``WarmPool`` (reference §6.9): at most one parked connection per session, keyed by a
settings ``signature`` (model, instructions, tools, MCP selection, permission mode, workspace,
resume token, and a hash of the driver's CLI environment and options). ``park`` replaces a park
with another signature and refreshes an equal one; ``consume`` removes the entry and returns it
at most once, only on an equal signature and only while its process is alive (a mismatched or
dead park is closed). A park not consumed within ``ttl_s`` is closed by its timer task.

Must never: hand one connection out twice, or keep a connection whose signature changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from drupe.sessions.drivers.base import ConnectInput

if TYPE_CHECKING:
    from drupe.sessions.drivers.claude_code.connection import ClaudeCodeConnection

__all__ = ["WarmPool", "signature"]

log = logging.getLogger(__name__)

_ROTATING_ENV = frozenset(("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"))


def signature(connect_input: ConnectInput, config_fingerprint: Mapping[str, Any]) -> str:
    """A stable digest of everything a spawned CLI freezes for one session."""
    session = connect_input.session
    env = {
        k: v for k, v in dict(config_fingerprint.get("env", {})).items() if k not in _ROTATING_ENV
    }
    facts = {
        "session": session.session_id,
        "model": connect_input.model_id,
        "instructions": session.instructions,
        "tools": list(session.tools),
        "mcp": list(session.mcp_servers),
        "permission": session.permission_mode,
        "workspace": str(session.workspace),
        "resume": connect_input.resume_token,
        "config": {**config_fingerprint, "env": env},
    }
    blob = json.dumps(facts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(slots=True, eq=False)
class _Park:
    connection: ClaudeCodeConnection
    signature: str
    expiry: anyio.CancelScope


class WarmPool:
    """Parked connections by session id (see the module docstring)."""

    def __init__(self, *, ttl_s: float = 300.0) -> None:
        self.ttl_s = ttl_s
        self._parks: dict[str, _Park] = {}

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._parks

    async def park(
        self,
        session_id: str,
        sig: str,
        connection: ClaudeCodeConnection,
        task_group: TaskGroup,
    ) -> None:
        """Park ``connection`` for ``session_id`` (closing a previous park of the session)."""
        old = self._parks.pop(session_id, None)
        if old is not None:
            old.expiry.cancel()
            if old.connection is not connection:
                await old.connection.close()
        park = _Park(connection, sig, anyio.CancelScope())
        self._parks[session_id] = park
        task_group.start_soon(self._expire, session_id, park)

    def refresh(self, session_id: str, sig: str, task_group: TaskGroup) -> bool:
        """Restart the idle timer of an equal park; False when there is none to refresh."""
        park = self._parks.get(session_id)
        if park is None or park.signature != sig or not park.connection.alive:
            return False
        park.expiry.cancel()
        park.expiry = anyio.CancelScope()
        task_group.start_soon(self._expire, session_id, park)
        return True

    async def consume(self, session_id: str, sig: str) -> ClaudeCodeConnection | None:
        """Take the session's park when its signature is ``sig`` and it is alive, else None."""
        park = self._parks.pop(session_id, None)
        if park is None:
            return None
        park.expiry.cancel()
        if park.signature != sig or not park.connection.alive:
            await park.connection.close()
            return None
        return park.connection

    async def close_all(self) -> None:
        parks, self._parks = list(self._parks.values()), {}
        for park in parks:
            park.expiry.cancel()
            await park.connection.close()

    async def _expire(self, session_id: str, park: _Park) -> None:
        with park.expiry:
            await anyio.sleep(self.ttl_s)
            if self._parks.get(session_id) is park:
                del self._parks[session_id]
                log.debug("warm connection for %s expired", session_id)
                await park.connection.close()
