"""``AccessPolicy``: the one decision point for who may see and act on a conversation.

Contract: the ``Conversations`` port calls ``check`` before it touches a conversation and
``list_filter`` when it lists them; no route decides access itself.

* ``check(caller, conversation_id, action)`` returns when ``caller`` may ``read`` (watch,
  resume, list its messages) or ``write`` (submit, stop, approve, delete) the conversation;
  otherwise it raises ``UnknownConversationError`` (a 404, never a 403: the answer does not say
  whether the conversation exists).
* ``owner_for_new(caller)`` is the owner stamped on a conversation the caller creates.
* ``list_filter(caller)`` is the owner id a listing is restricted to (None: every owner).

``AllowAll`` is the policy of a server without identity: everyone may do everything.
"""

from __future__ import annotations

from typing import Literal, Protocol

from drupe.admission.principal import Principal

__all__ = ["Action", "AccessPolicy", "AllowAll"]

Action = Literal["read", "write", "delete"]
"""``delete`` is the owner's (or an admin's) alone: a write share changes, never deletes."""


class AccessPolicy(Protocol):
    async def check(self, caller: Principal, conversation_id: str, action: Action) -> None: ...

    def owner_for_new(self, caller: Principal) -> str | None: ...

    def list_filter(self, caller: Principal) -> str | None: ...


class AllowAll:
    """No identity: every caller may read and write every conversation."""

    async def check(self, caller: Principal, conversation_id: str, action: Action) -> None:
        return None

    def owner_for_new(self, caller: Principal) -> str | None:
        return None

    def list_filter(self, caller: Principal) -> str | None:
        return None
