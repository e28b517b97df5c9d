"""``OwnerPolicy``: the ``AccessPolicy`` of a server with users (issue 20).

Contract (the port calls it; no route decides access itself):

* An admin may read and write every conversation.
* A member may read and write the conversations they own, write those shared with them to
  write, and read (watch, resume, list messages) those shared with them to read. An agent
  session's conversation (``agent-session:<id>``) belongs to the session's owner and is shared
  through its agent's shares. An ephemeral conversation belongs to whoever made it. Deleting is
  the owner's alone (an admin's too): a write share changes a conversation, never deletes it,
  as with agents.
* Anything else is ``UnknownConversationError`` (404): the answer never says whether it exists.
  A row from before identity with no owner is an admin's.
* ``owner_for_new(caller)`` stamps the caller; ``list_filter(caller)`` is None for an admin
  (every owner) and the member's id otherwise.

Owners never change, so they are cached (bounded); shares are read on each check that needs
them (a member's own conversations need none). No check runs per chunk of a live answer.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from drupe.admission.access import Action
from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.errors import UnknownConversationError
from drupe.ids import is_session_conversation, session_id_of

if TYPE_CHECKING:
    from drupe.admission.ephemeral import EphemeralStore
    from drupe.persistence.db import Database
    from drupe.persistence.shares import ShareKind

__all__ = ["OwnerPolicy"]

_CACHE_MAX: Final = 20_000


class OwnerPolicy:
    def __init__(self, db: Database, ephemeral: EphemeralStore) -> None:
        self.db = db
        self.ephemeral = ephemeral
        self._owners: OrderedDict[str, tuple[str | None, ShareKind, str]] = OrderedDict()

    async def check(self, caller: Principal, conversation_id: str, action: Action) -> None:
        if caller.is_admin:
            return
        found = await self._owner(conversation_id)
        if found is not None:
            owner, kind, resource_id = found
            if owner is not None and owner == caller.user_id:
                return
            if action == "delete":
                raise UnknownConversationError(conversation_id)
            access = await self.db.shares.access_of(kind, resource_id, caller.user_id)
            if access == "write" or (access == "read" and action == "read"):
                return
        raise UnknownConversationError(conversation_id)

    def owner_for_new(self, caller: Principal) -> str | None:
        # The local admin is no user: what it creates is unowned (an admin's) until the first
        # admin adopts it.
        return None if caller == LOCAL_ADMIN else caller.user_id

    def list_filter(self, caller: Principal) -> str | None:
        return None if caller.is_admin else caller.user_id

    async def _owner(self, conversation_id: str) -> tuple[str | None, ShareKind, str] | None:
        """``(owner, share kind, share id)``; None when there is no such conversation."""
        ephemeral = self.ephemeral.get(conversation_id)
        if ephemeral is not None:
            return ephemeral.owner_id, "conversation", conversation_id
        cached = self._owners.get(conversation_id)
        if cached is not None:
            return cached
        found: tuple[str | None, ShareKind, str] | None
        if is_session_conversation(conversation_id):
            session_id = session_id_of(conversation_id)
            session = await self.db.agents.get_session(session_id) if session_id else None
            found = None if session is None else (session.owner_id, "agent", session.agent_id)
        else:
            record = (
                await self.db.conversations.get(conversation_id)
                if len(conversation_id) <= 256
                else None
            )
            found = None if record is None else (record.owner_id, "conversation", conversation_id)
        if found is not None:
            self._owners[conversation_id] = found
            if len(self._owners) > _CACHE_MAX:
                self._owners.popitem(last=False)
        return found
