"""``SessionLookup``: read an agent session and its agent as a driver's ``SessionInfo``.

Reads only (through ``AgentStore``); it never writes and never caches, so every call sees the
agent as it is now (the host re-reads the model before each launch). Returns ``None`` for a
missing session or agent; ``SessionInfo.model_id`` is ``""`` when the agent has no model.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from drupe.sessions.drivers.base import PermissionMode, SessionInfo

if TYPE_CHECKING:
    from drupe.persistence.agents import AgentStore

__all__ = ["SessionLookup"]


class SessionLookup:
    def __init__(self, agents: AgentStore) -> None:
        self.agents = agents

    async def load(self, session_id: str) -> SessionInfo | None:
        session = await self.agents.get_session(session_id)
        if session is None:
            return None
        agent = await self.agents.get_agent(session.agent_id)
        if agent is None:
            return None
        return SessionInfo(
            session_id=session.id,
            agent_id=agent.id,
            agent_name=agent.name,
            driver_type=agent.driver_type,
            model_id=agent.model_id or "",
            instructions=agent.instructions,
            workspace=Path(agent.workspace) if agent.workspace else None,
            tools=agent.tools,
            mcp_servers=agent.mcp_servers,
            permission_mode=cast(PermissionMode, agent.permission_mode),
            settings=dict(session.settings),
        )

    async def latest_resume_token(self, session_id: str) -> str | None:
        return await self.agents.latest_resume_token(session_id)
