"""``install_sessions``: plug the agent-session host into a running ``Runtime``.

Called once by the composition root (``drupe.app.open_runtime``) after the dispatcher exists:
it builds the host over the runtime's stream manager and stores, installs the host's hold policy
on the manager, and puts the agent-session provider FIRST in the dispatcher's providers (the
persistent provider is the catch-all and already refuses ``agent-session:`` ids). The drivers
are registered by the caller; nothing registers itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.host import DEFAULT_IDLE_TTL, AgentSessionHost
from drupe.streaming.context.agent_session import AgentSessionProvider

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["install_sessions"]


def install_sessions(
    runtime: Runtime, drivers: DriverRegistry, *, idle_ttl: float = DEFAULT_IDLE_TTL
) -> AgentSessionHost:
    """Build the host, add its provider first to the dispatcher; returns the host."""
    host = AgentSessionHost(
        manager=runtime.manager,
        drivers=drivers,
        agents=runtime.db.agents,
        messages=runtime.db.messages,
        idle_ttl=idle_ttl,
    )
    runtime.dispatcher.providers.insert(
        0, AgentSessionProvider(host=host, messages=runtime.db.messages, drivers=drivers)
    )
    return host
