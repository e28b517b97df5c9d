"""``Ownership``: the port through which cluster mode makes admission cluster-wide.

Contract:

* ``Dispatcher.dispatch`` enters ``ownership.hold(conversation_id)`` BEFORE the process-local
  conversation lock. In one process (``LocalOwnership``) it is a no-op: the local lock is the
  whole admission lock. In cluster mode the implementation (``drupe.cluster.ownership``) takes
  or keeps this node's lease on the conversation, and raises ``NotOwnerError`` (naming the
  owner) when another node holds it, before anything is written: the caller routes the request
  to that node instead.
* ``fence_for(conversation_id)`` is the fencing token row writes of that conversation carry
  (None in one process: unfenced writes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

__all__ = ["LocalOwnership", "Ownership"]


class Ownership(Protocol):
    def hold(self, conversation_id: str) -> AbstractAsyncContextManager[None]:
        """Own the conversation for the block, or raise ``NotOwnerError``."""
        ...

    def fence_for(self, conversation_id: str) -> int | None:
        """The fencing token of this node's writes for the conversation (None: unfenced)."""
        ...


class LocalOwnership:
    """One process owns everything: no lease, no fence."""

    def hold(self, conversation_id: str) -> AbstractAsyncContextManager[None]:
        return _nothing()

    def fence_for(self, conversation_id: str) -> int | None:
        return None


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield
