"""``ChatWorker``: one owned task per active chat: debounce merge, serial admission, commands.

Contract (``docs/lifecycles/channels.md``):

* Items arrive already admitted (allow-list, dedupe and rate limit are the inbox's job) and are
  handled one at a time, in arrival order.
* Debounce: a text message opens a burst that closes ``debounce`` seconds after its LAST
  message, and at most ``2 x debounce`` after its first; the burst is merged (texts joined with a
  newline, attachments concatenated, the first message's sender, the last message's id) and
  dispatched as ONE submit. ``debounce = 0`` dispatches every message at once. Time comes from
  the injected clock.
* Dispatch never waits for the answer: a burst that arrives while the chat's conversation is
  answering is admitted by the dispatcher's steering rules (a chat steer; an agent redirect or
  queued follow-up). The chat's one ``ChannelListener`` is the only subscriber, so each answer
  reaches the chat once.
* Session resolution (``chat_binding``): the chat's binding (``ChannelStore``) names its
  conversation or agent session; a missing, deleted or foreign one is replaced by a new one;
  ``/new`` always rebinds.
* Approval buttons: a press is applied once; a press on an approval already decided (here,
  on another surface, or stored before a restart) is answered "already decided" to its
  presser and changes nothing; every press is answered (``adapter.answer``).
* Commands: see ``drupe.channels.chat_commands``. A failing item gets one error notice; the worker
  goes on.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from drupe.admission.base import Submit
from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.channels.approval_press import HEADLESS, answer_press, decide_press
from drupe.channels.burst import Burst, merge
from drupe.channels.callers import channel_caller
from drupe.channels.chat_binding import chat_binding
from drupe.channels.chat_commands import Command, help_text, parse_command, whoami_text
from drupe.channels.contract import ButtonPress, Inbound
from drupe.channels.guard import wrap_untrusted
from drupe.errors import DrupeError
from drupe.ids import session_id_of
from drupe.persistence.channels import ChannelBinding
from drupe.persistence.users import UserRecord

if TYPE_CHECKING:
    from drupe.admission.conversations import Conversations, Subscription
    from drupe.channels.approvals import ApprovalBoard
    from drupe.channels.config import ChannelConfig
    from drupe.channels.contract import ChannelAdapter
    from drupe.channels.delivery_listener import ChannelListener
    from drupe.channels.outbox import ChatOutbox, Clock
    from drupe.persistence.db import Database
    from drupe.sessions.host import AgentSessionHost

__all__ = ["ChatContext", "ChatWorker"]

log = logging.getLogger(__name__)

TYPING_INTERVAL = 4.0
_Item = Inbound | ButtonPress


@dataclass(slots=True, kw_only=True)
class ChatContext:
    """What a chat worker uses (built by the channel service)."""

    config: ChannelConfig
    adapter: ChannelAdapter
    outbox: ChatOutbox
    listener: ChannelListener
    conversations: Conversations
    db: Database
    sessions: AgentSessionHost | None
    validate_model: Callable[[str], None]
    clock: Clock
    task_group: anyio.abc.TaskGroup
    approvals: ApprovalBoard
    send_timeout: float = 15.0


class ChatWorker:
    def __init__(self, ctx: ChatContext, chat_id: str) -> None:
        self.ctx = ctx
        self.chat_id = chat_id
        self._tx, self._rx = anyio.create_memory_object_stream[_Item](max_buffer_size=256)
        self._typing = False
        self._follower: Subscription | None = None
        self._followed: str | None = None
        self.handled = 0
        self.burst_size = 0
        """Messages waiting in the current burst (observable by tests and /status)."""

    def put(self, item: _Item) -> bool:
        """Queue an item; False when the chat's queue is full (the item is refused)."""
        try:
            self._tx.send_nowait(item)
        except anyio.WouldBlock:
            return False
        return True

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._loop()
        finally:
            if self._follower is not None:
                self._follower.close()

    async def _dispatch(self, submit: Submit, caller: Principal) -> None:
        """Admit ``submit`` as ``caller`` (the Drupe user the message's platform user acts as,
        ``channels.callers``); the chat's listener gets every answer of its conversation (in
        cluster mode from the chunk log, wherever the conversation's owner runs it)."""
        ctx = self.ctx
        if self._followed != submit.conversation_id:
            if self._follower is not None:
                self._follower.close()
            self._follower = await ctx.conversations.follow_turns(
                caller, submit.conversation_id, ctx.listener
            )
            self._followed = submit.conversation_id
        await ctx.conversations.submit(caller, submit)

    async def _loop(self) -> None:
        debounce = self.ctx.config.debounce
        burst = Burst()
        while True:
            item = await (self._receive_until(burst.deadline) if burst else self._rx.receive())
            if item is None:
                pending, burst = burst, Burst()
                self.burst_size = 0
                await self._guarded(self._submit, merge(pending.messages))
                continue
            if isinstance(item, ButtonPress):
                await self._guarded(self._button, item)
                continue
            command = parse_command(item.text) if not item.attachments else None
            if command is None:
                if debounce <= 0:
                    await self._guarded(self._submit, item)
                else:
                    burst = burst.add(item, self.ctx.clock.now(), debounce)
                    self.burst_size = len(burst)
                continue
            if command.name == "stop":
                burst = Burst()
            elif not command.immediate and burst:
                pending, burst = burst, Burst()
                await self._guarded(self._submit, merge(pending.messages))
            self.burst_size = len(burst)
            await self._guarded(self._command, command, item)

    async def _receive_until(self, deadline: float) -> _Item | None:
        received: list[_Item] = []
        async with anyio.create_task_group() as tg:

            async def receive() -> None:
                received.append(await self._rx.receive())
                tg.cancel_scope.cancel()

            async def timer() -> None:
                await self.ctx.clock.sleep(max(0.0, deadline - self.ctx.clock.now()))
                tg.cancel_scope.cancel()

            tg.start_soon(receive)
            tg.start_soon(timer)
        return received[0] if received else None

    async def _guarded(self, handler: Callable[..., Any], *args: Any) -> None:
        try:
            await handler(*args)
        except anyio.get_cancelled_exc_class():
            raise
        except DrupeError as err:
            self.ctx.outbox.notice(f"⚠️ {err}")
        except Exception:
            log.exception("channel %s chat %s: processing failed", self.ctx.config.id, self.chat_id)
            self.ctx.outbox.notice(
                "⚠️ An error occurred while processing your message. Please try again later."
            )
        finally:
            self.handled += 1

    # --- sessions -------------------------------------------------------------------------------

    async def binding(self, *, fresh: bool = False, user_id: str | None = None) -> ChannelBinding:
        """The chat's binding (``chat_binding``) for the Drupe user ``user_id`` acts as."""
        caller = await channel_caller(self.ctx.config, self.ctx.db, user_id)
        return await chat_binding(self.ctx, self.chat_id, caller, fresh=fresh)

    # --- messages -------------------------------------------------------------------------------

    async def _submit(self, message: Inbound, *, raw_text: str | None = None) -> None:
        ctx = self.ctx
        for name in message.oversized:
            ctx.outbox.notice(
                f"⚠️ {name} is larger than {ctx.config.max_attachment_bytes} bytes "
                "and was not passed on."
            )
        if not message.text.strip() and not message.attachments:
            return
        # Who the message acts as, once: the binding and the admission both need it.
        caller = await channel_caller(ctx.config, ctx.db, message.user_id)
        binding = await chat_binding(ctx, self.chat_id, caller)
        text = raw_text
        if text is None:
            text = wrap_untrusted(
                message.text,
                channel_type=ctx.config.type,
                user_name=message.user_name,
                user_id=message.user_id,
            )
        parts: list[dict[str, Any]] = []
        model_ids: list[str] = []
        if binding.target.startswith("model:"):
            model_ids = [binding.target.removeprefix("model:")]
            parts += [_file_part(a.name, a.media_type, a.data) for a in message.attachments]
        elif message.attachments:
            saved = await self._save_to_workspace(binding, message)
            text += "\n\n[Attached files saved to workspace]\n" + "\n".join(f"- {p}" for p in saved)
        parts.insert(0, {"type": "text", "text": text})
        metadata = {
            "channel": ctx.config.id,
            "chatId": self.chat_id,
            "userId": message.user_id,
            "headless": ctx.config.headless or not ctx.adapter.buttons,
        }
        await self._dispatch(
            Submit(
                conversation_id=binding.conversation_id,
                parts=parts,
                model_ids=model_ids,
                metadata=metadata,
            ),
            caller,
        )
        self._start_typing(binding.conversation_id)

    async def _save_to_workspace(self, binding: ChannelBinding, message: Inbound) -> list[str]:
        session_id = session_id_of(binding.conversation_id)
        host = self.ctx.sessions
        info = await host.lookup.load(session_id) if host is not None and session_id else None
        if info is None or info.workspace is None:
            raise DrupeError("this agent has no workspace to save attachments in")
        folder = Path(info.workspace) / ".drupe" / "channel-files"
        saved: list[str] = []
        for attachment in message.attachments:
            safe = "".join("_" if c in '/\\:*?"<>|' else c for c in attachment.name) or "file"
            path = folder / f"{int(time.time() * 1000)}-{safe}"
            await anyio.Path(folder).mkdir(parents=True, exist_ok=True)
            await anyio.Path(path).write_bytes(attachment.data)
            saved.append(str(path))
        return saved

    def _start_typing(self, conversation_id: str) -> None:
        if self._typing:
            return
        self._typing = True
        self.ctx.task_group.start_soon(self._typing_loop, conversation_id)

    async def _typing_loop(self, conversation_id: str) -> None:
        ctx = self.ctx
        try:
            while ctx.conversations.is_live(conversation_id) or self._session_busy(conversation_id):
                with anyio.move_on_after(ctx.send_timeout):
                    try:
                        await ctx.adapter.typing(self.chat_id)
                    except Exception as err:  # best effort
                        log.debug("typing indicator failed: %s", err)
                await ctx.clock.sleep(TYPING_INTERVAL)
        finally:
            self._typing = False

    def _session_busy(self, conversation_id: str) -> bool:
        session_id = session_id_of(conversation_id)
        host = self.ctx.sessions
        return host is not None and session_id is not None and host.is_busy(session_id)

    # --- commands -------------------------------------------------------------------------------

    async def _command(self, command: Command, message: Inbound) -> None:
        ctx = self.ctx
        reply = ctx.outbox.notice
        match command.name:
            case "help":
                reply(help_text(ctx.config.id))
            case "whoami":
                try:
                    acting = await channel_caller(ctx.config, ctx.db, message.user_id)
                    acts_as = acting.name if acting != LOCAL_ADMIN else None
                except DrupeError:
                    acts_as = None
                reply(whoami_text(ctx.config.id, message.user_id, self.chat_id, acts_as))
            case "link":
                reply(await self._link(command.args, message.user_id))
            case "unlink":
                reply(await self._unlink(message.user_id))
            case "new":
                binding = await self.binding(fresh=True, user_id=message.user_id)
                kind = "agent session" if binding.target.startswith("agent:") else "conversation"
                reply(f"New {kind} started.")
            case "stop":
                # An answer shown in the chat ends with its "(stopped)" mark: that is the reply.
                showing = ctx.listener.answering
                if not await self._stop(message.user_id):
                    reply("Nothing to stop.")
                elif not showing:
                    reply("Stopped.")
            case "status":
                reply(await self._status())
            case "model":
                reply(await self._model(command.args, message.user_id))
            case "compact":
                binding = await self.binding(user_id=message.user_id)
                if not binding.target.startswith("agent:"):
                    reply("/compact applies to agent sessions; this chat talks to a model.")
                    return
                await self._submit(replace(message, text="/compact"), raw_text="/compact")

    async def _link(self, code: str, user_id: str) -> str:
        """``/link <code>``: this IM account acts as the code's user from now on; the chat
        starts a new conversation as them (the current one may be someone else's)."""
        ctx = self.ctx
        if not code:
            return (
                "Send /link with the code from Drupe: Settings -> Chat accounts -> "
                "Link a chat account."
            )
        if ctx.config.users.get(user_id) is not None:
            return (
                "This chat account is mapped to a Drupe user in config.toml "
                f"([channels.{ctx.config.id}] users): ask an admin to change that."
            )
        user = await ctx.db.chat_links.redeem(
            code, channel_id=ctx.config.id, platform_user_id=user_id
        )
        if user is None:
            return (
                "That code is unknown or expired: make a new one in Drupe "
                "(Settings -> Chat accounts)."
            )
        await self._audit("chat.link", user, user_id)
        await self.binding(fresh=True, user_id=user_id)
        return (
            f"Linked: this chat account now acts as the Drupe user {user.name}. "
            "New conversation started."
        )

    async def _unlink(self, user_id: str) -> str:
        ctx = self.ctx
        linked = await ctx.db.chat_links.linked_user(ctx.config.id, user_id)
        if linked is None or not await ctx.db.chat_links.unlink(ctx.config.id, user_id):
            return "This chat account is not linked to a Drupe user."
        await self._audit("chat.unlink", linked, user_id)
        await self.binding(fresh=True, user_id=user_id)
        return f"Unlinked from the Drupe user {linked.name}. New conversation started."

    async def _audit(self, action: str, user: UserRecord, platform_user_id: str) -> None:
        channel = self.ctx.config.id
        await self.ctx.db.audit.record(
            action,
            actor_id=user.id,
            actor_name=user.name,
            target=f"{channel}:{platform_user_id}",
            detail={"channel": channel},
        )

    async def _stop(self, user_id: str | None) -> bool:
        ctx = self.ctx
        binding = await ctx.db.channels.binding(ctx.config.id, self.chat_id)
        if binding is None:
            return False
        caller = await channel_caller(ctx.config, ctx.db, user_id)
        return await ctx.conversations.stop(caller, binding.conversation_id)

    async def _status(self) -> str:
        ctx = self.ctx
        binding = await ctx.db.channels.binding(ctx.config.id, self.chat_id)
        lines = [f"Channel: {ctx.config.id} ({ctx.config.type})", f"Chat: {self.chat_id}"]
        if binding is None:
            lines.append("No conversation yet: send a message to start one.")
            return "\n".join(lines)
        status = ctx.conversations.status(binding.conversation_id)
        lines += [
            f"Target: {binding.target}",
            f"Conversation: {binding.conversation_id}",
            f"State: {status.status if status is not None else 'idle'}",
        ]
        return "\n".join(lines)

    async def _model(self, wanted: str, user_id: str) -> str:
        ctx = self.ctx
        binding = await self.binding(user_id=user_id)
        if binding.target.startswith("agent:"):
            session_id = session_id_of(binding.conversation_id)
            info = (
                await ctx.sessions.lookup.load(session_id)
                if ctx.sessions is not None and session_id
                else None
            )
            model = info.model_id if info is not None else "unknown"
            if wanted:
                return (
                    f"This chat talks to agent {ctx.config.target.id} (model {model}); "
                    "change the agent's model with `drupe agent edit`."
                )
            return f"Model: {model} (agent {ctx.config.target.id})"
        current = binding.target.removeprefix("model:")
        if not wanted:
            return f"Model: {current}"
        ctx.validate_model(wanted)
        await ctx.db.channels.bind(
            ctx.config.id,
            self.chat_id,
            conversation_id=binding.conversation_id,
            target=f"model:{wanted}",
        )
        return f"Model switched to {wanted}."

    # --- approvals ------------------------------------------------------------------------------

    async def _button(self, press: ButtonPress) -> None:
        reply = ""
        try:
            reply = await decide_press(self.ctx, self.chat_id, press, self._start_typing)
        finally:
            if press.user_id != HEADLESS:
                await answer_press(self.ctx.adapter, press, reply, self.ctx.send_timeout)


def _file_part(name: str, media_type: str, data: bytes) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    return {
        "type": "file",
        "mediaType": media_type,
        "filename": name,
        "url": f"data:{media_type};base64,{encoded}",
    }
