"""``StreamRevoker``: ends the open streams of a signed-out or disabled user, on every node.

Contract: the app registers each SSE response's ``FrameBuffer`` with the identity that opened it
(``add``; ``discard`` when it ends). Every ``interval`` seconds one task asks the database which
of the registered sessions and personal tokens are still live, and which users named by a
trusted proxy's header are still enabled (one query each, however many streams are open:
``AuthSessionStore.still_valid``, ``UserStore.tokens_still_valid``, ``enabled_among``) and closes
the buffers of the others: the response ends cleanly (what was queued is sent, then the end of
the stream). Each node sweeps its own streams against the shared database, so a sign-out, a
revoked token or a disabled user ends their streams within ``interval`` plus one query on every
node. Streams of the local admin (auth off) and of gateway keys are not swept.

Ownership: the app's lifespan enters it (``app.state.stream_revoker``) like the ``PingTicker``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from drupe.identity.authenticator import Authenticator, Identity
from drupe.lifetimes import TaskOwner
from drupe.streaming.listeners.sse import FrameBuffer

if TYPE_CHECKING:
    from drupe.persistence.db import Database

__all__ = ["StreamRevoker"]

log = logging.getLogger(__name__)


class StreamRevoker(TaskOwner):
    def __init__(
        self, db: Database, authenticator: Authenticator | None, *, interval: float
    ) -> None:
        self.db = db
        self.authenticator = authenticator
        self.interval = interval
        self._open: dict[FrameBuffer, Identity] = {}

    def __len__(self) -> int:
        return len(self._open)

    def add(self, buffer: FrameBuffer, identity: Identity) -> None:
        if (identity.ref is not None and identity.via in ("session", "token")) or (
            identity.via == "header"
        ):
            self._open[buffer] = identity

    def discard(self, buffer: FrameBuffer) -> None:
        self._open.pop(buffer, None)

    async def sweep(self) -> int:
        """Close the streams whose credential is no longer live; how many were closed."""
        if not self._open:
            return 0
        sessions = {i.ref for i in self._open.values() if i.via == "session" and i.ref}
        tokens = {i.ref for i in self._open.values() if i.via == "token" and i.ref}
        live_sessions = await self.db.auth_sessions.still_valid(sessions) if sessions else set()
        live_tokens = await self.db.users.tokens_still_valid(sorted(tokens)) if tokens else set()
        named = sorted({i.principal.user_id for i in self._open.values() if i.via == "header"})
        enabled = await self.db.users.enabled_among(named) if named else set()
        closed = 0
        for buffer, identity in list(self._open.items()):
            if identity.via == "header":
                if identity.principal.user_id in enabled:
                    continue
            elif identity.ref in (live_sessions if identity.via == "session" else live_tokens):
                continue
            buffer.close()
            self._open.pop(buffer, None)
            if self.authenticator is not None:
                self.authenticator.forget_user(identity.principal.user_id)
            closed += 1
        return closed

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        group.start_soon(self._run)

    async def _run(self) -> None:
        while True:
            await anyio.sleep(self.interval)
            try:
                closed = await self.sweep()
            except Exception:  # isolation boundary: a failed sweep is retried next interval
                log.exception("the revocation sweep failed")
                continue
            if closed:
                log.info("ended %d stream(s) of revoked sign-ins", closed)
