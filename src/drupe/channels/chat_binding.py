"""A chat's binding: the conversation or agent session a channel chat talks to.

Contract: ``chat_binding`` returns the chat's stored binding while it is still valid (a model
target's conversation still exists; an agent target's session still exists and belongs to the
channel's agent) and the Drupe user the platform user ``user_id`` acts as may write to it.
Otherwise (or with ``fresh``, the ``/new`` command) it creates a new
conversation or agent session, owned by ``caller``, the Drupe user the platform user acts as
(``channels.callers``, resolved once per message by the chat worker; the local admin owns
nothing), and binds the chat to it. A model chat
keeps a ``/model`` switch across a rebind. So when the account's Drupe user changes (a
``/link``, an unlink, an admin's new mapping), a direct chat goes on in a new conversation of
the new user instead of being refused; in a group chat whose members act as different users,
the chat moves to the conversation of whoever speaks with rights the current one lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.errors import UnknownConversationError
from drupe.ids import session_conversation_id, session_id_of
from drupe.persistence.channels import ChannelBinding

if TYPE_CHECKING:
    from drupe.channels.chat_worker import ChatContext

__all__ = ["chat_binding"]


async def chat_binding(
    ctx: ChatContext, chat_id: str, caller: Principal, *, fresh: bool = False
) -> ChannelBinding:
    """The chat's binding; a new one's conversation (or session) belongs to ``caller``, the
    Drupe user the message's platform user acts as (``channels.callers.channel_caller``)."""
    current = await ctx.db.channels.binding(ctx.config.id, chat_id)
    if (
        current is not None
        and not fresh
        and await _still_valid(ctx, current)
        and await _writable(ctx, caller, current)
    ):
        return current
    owner_id = None if caller == LOCAL_ADMIN else caller.user_id
    target = ctx.config.target
    title = f"{ctx.config.type} {chat_id}"
    if target.kind == "model":
        model_id = target.id
        if current is not None and current.target.startswith("model:"):
            model_id = current.target.removeprefix("model:")  # keep a /model switch
        conversation = await ctx.db.conversations.create(
            title=title,
            metadata={"channel": ctx.config.id, "chatId": chat_id},
            owner_id=owner_id,
        )
        return await ctx.db.channels.bind(
            ctx.config.id,
            chat_id,
            conversation_id=conversation.id,
            target=f"model:{model_id}",
        )
    session = await ctx.db.agents.create_session(
        target.id,
        title=title,
        settings={"channel": ctx.config.id, "chatId": chat_id},
        owner_id=owner_id,
    )
    return await ctx.db.channels.bind(
        ctx.config.id,
        chat_id,
        conversation_id=session_conversation_id(session.id),
        target=f"agent:{target.id}",
    )


async def _writable(ctx: ChatContext, caller: Principal, binding: ChannelBinding) -> bool:
    try:
        await ctx.conversations.check(caller, binding.conversation_id, "write")
    except UnknownConversationError:
        return False
    return True


async def _still_valid(ctx: ChatContext, binding: ChannelBinding) -> bool:
    target = ctx.config.target
    if target.kind == "model":
        if not binding.target.startswith("model:"):
            return False
        return await ctx.db.conversations.get(binding.conversation_id) is not None
    session_id = session_id_of(binding.conversation_id)
    if binding.target != str(target) or session_id is None:
        return False
    session = await ctx.db.agents.get_session(session_id)
    return session is not None and session.agent_id == target.id
