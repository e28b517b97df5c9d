"""``reconcile_at_boot``: the boot step that runs before the first admission (invariant 3).

Agent sessions that a crash left with a ``pending`` row lose their resume tokens (the runtime's
transcript may hold text nobody saw), then every ``pending`` row becomes ``error``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from drupe.errors import PersistenceError

if TYPE_CHECKING:
    from drupe.persistence.db import Database

__all__ = ["reconcile_at_boot"]

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
