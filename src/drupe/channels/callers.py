"""Who a chat message acts as: the Drupe user an IM platform user maps to.

Contract: ``channel_caller(config, db, platform_user_id)`` is the principal of the Drupe user
named by the channel's ``users`` table for that platform user (the admin's config wins), else
the user who linked that IM account to themselves on this channel (``/link <code>``,
``drupe.persistence.chat_links``), else the channel's ``run_as``; with none, the local admin (a
channel from before identity: its chats are the admin's). A mapped or linked user that does not
exist or is disabled refuses the message (``ValidationError``, told to the chat): a chat never
falls back to someone else's rights. The chats' conversations belong to the user a message acts
as (the access policy stamps the caller on what it creates).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.errors import ValidationError

if TYPE_CHECKING:
    from drupe.channels.config import ChannelConfig
    from drupe.persistence.db import Database

__all__ = ["channel_caller"]


async def channel_caller(
    config: ChannelConfig, db: Database, platform_user_id: str | None
) -> Principal:
    name = config.users.get(platform_user_id) if platform_user_id is not None else None
    if name is None and platform_user_id is not None:
        linked = await db.chat_links.linked_user(config.id, platform_user_id)
        if linked is not None:
            if linked.disabled:
                raise ValidationError(
                    f"this chat account is linked to the Drupe user {linked.name!r}, who is "
                    "disabled"
                )
            return Principal(user_id=linked.id, name=linked.name, role=linked.role)
    name = name or config.run_as
    if name is None:
        return LOCAL_ADMIN
    user = await db.users.get_by_name(name)
    if user is None or user.disabled:
        raise ValidationError(
            f"this chat acts as the Drupe user {name!r}, who does not exist or is disabled"
        )
    return Principal(user_id=user.id, name=user.name, role=user.role)
