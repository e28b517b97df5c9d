"""``install_sessions``: plug the agent-session host into a running ``Runtime``.

Called once by the composition root (``drupe.app.open_runtime``) after the dispatcher exists:
it builds the host over the runtime's stream manager and stores, installs the host's hold policy
on the manager, and puts the agent-session provider FIRST in the dispatcher's providers (the
persistent provider is the catch-all and already refuses ``agent-session:`` ids). The drivers
are registered by the caller; nothing registers itself.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from drupe.errors import PersistenceError
from drupe.sessions.drivers.registry import DriverRegistry
from drupe.sessions.host import DEFAULT_IDLE_TTL, AgentSessionHost
from drupe.streaming.context.agent_session import AgentSessionProvider

if TYPE_CHECKING:
    from drupe.app import Runtime
    from drupe.persistence.db import Database

__all__ = ["install_sessions", "reconcile_at_boot"]

log = logging.getLogger(__name__)


async def reconcile_at_boot(db: Database) -> int:
    """Boot reconciliation (run before the first admission): sessions that a crash left with a
    ``pending`` row lose their resume tokens, then every ``pending`` row becomes ``error``.

    Returns the number of rows reconciled. Failures of the token step are logged, never block
    the boot (the row step still runs).
    """
    try:
        sessions = await db.agents.discard_tokens_for_pending()
        if sessions:
            log.warning("boot: discarded the resume tokens of %d agent session(s)", len(sessions))
    except PersistenceError:
        log.exception("boot: discarding agent-session resume tokens failed")
    return await db.messages.reconcile_pending()


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
