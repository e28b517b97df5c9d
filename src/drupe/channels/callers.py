"""Who a chat message acts as: the Drupe user an IM platform user maps to.

Contract: ``channel_caller(config, users, platform_user_id)`` is the principal of the Drupe user
named by the channel's ``users`` table for that platform user, else by its ``run_as``; with
neither, the local admin (a channel from before identity: its chats are the admin's). A mapped
user that does not exist or is disabled refuses the message (``ValidationError``, told to the
chat): a chat never falls back to someone else's rights. The chats' conversations belong to the
user a message acts as (the access policy stamps the caller on what it creates).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.errors import ValidationError

if TYPE_CHECKING:
    from drupe.channels.config import ChannelConfig
    from drupe.persistence.users import UserStore

__all__ = ["channel_caller"]


async def channel_caller(
    config: ChannelConfig, users: UserStore, platform_user_id: str | None
) -> Principal:
    name = config.users.get(platform_user_id) if platform_user_id is not None else None
    name = name or config.run_as
    if name is None:
        return LOCAL_ADMIN
    user = await users.get_by_name(name)
    if user is None or user.disabled:
        raise ValidationError(
            f"this chat acts as the Drupe user {name!r}, who does not exist or is disabled"
        )
    return Principal(user_id=user.id, name=user.name, role=user.role)
