"""Applying an approval button press once (issue 23.5), for ``ChatWorker``.

Contract:

* ``decide_press(ctx, chat_id, press, start_typing)`` returns the answer for the presser. A
  press on an approval that is already decided (known to the ``ApprovalBoard``: pressed here,
  or seen decided in the stream; or stored on its message, which survives restarts) changes
  nothing and is answered ``Verdict.already()``; a press while another chat's press is being
  applied is answered "being decided". Otherwise the decision goes through the
  ``Conversations`` port; once applied, the board records it (``by`` the presser), which
  settles the buttons of every chat that offered it.
* ``answer_press`` answers the presser through the adapter (best effort, bounded).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import anyio

from drupe.channels.approvals import Verdict
from drupe.channels.callers import channel_caller
from drupe.errors import ValidationError
from drupe.ids import session_id_of
from drupe.streaming.approval_rules import Decision

if TYPE_CHECKING:
    from drupe.channels.chat_worker import ChatContext
    from drupe.channels.contract import ButtonPress, ChannelAdapter
    from drupe.persistence.db import Database

__all__ = ["HEADLESS", "answer_press", "decide_press"]

log = logging.getLogger(__name__)

HEADLESS: Final = ""
"""The user id of a denial the channel makes itself (a headless chat cannot approve)."""


async def decide_press(
    ctx: ChatContext, chat_id: str, press: ButtonPress, start_typing: Callable[[str], None]
) -> str:
    verb, _, approval_id = press.data.partition(":")
    if verb not in ("approve", "deny") or not approval_id:
        return ""
    approved = verb == "approve"
    binding = await ctx.db.channels.binding(ctx.config.id, chat_id)
    if binding is None:
        return "That approval is no longer pending."
    board = ctx.approvals
    verdict = board.verdict(approval_id) or await stored_verdict(
        ctx.db, binding.conversation_id, approval_id
    )
    if verdict is not None:
        board.decide(approval_id, verdict.approved, verdict.by)  # settles what still shows it
        return verdict.already()
    if board.deciding(approval_id) is not None:
        return "That approval is being decided."
    session_id = session_id_of(binding.conversation_id)
    by = None if press.user_id == HEADLESS else (press.user_name or press.user_id)
    board.begin(approval_id, by or "")
    try:
        # A chat turn's decision applies once the turn that asked has ended (awaiting
        # approval); an agent session's driver holds it while its turn is live. In cluster
        # mode the owner's node answers, and the continuation reaches this chat from the log.
        caller = await channel_caller(
            ctx.config, ctx.db, None if press.user_id == HEADLESS else press.user_id
        )
        outcome = await ctx.conversations.approve(
            caller,
            binding.conversation_id,
            [Decision(approval_id=approval_id, approved=approved)],
            after_settle=session_id is None,
        )
    except ValidationError as err:  # e.g. decided the other way on another surface
        return f"⚠️ {err}"
    finally:
        board.end(approval_id)
    if not outcome.ok:
        if session_id is not None:  # its host no longer holds it: decided, or the turn ended
            return "That approval is no longer pending."
        return f"⚠️ {outcome.reason or 'the decision was not applied'}"
    board.decide(approval_id, approved, by)
    if outcome.continued:
        start_typing(binding.conversation_id)
    return "Approved." if approved else "Denied."


async def stored_verdict(db: Database, conversation_id: str, approval_id: str) -> Verdict | None:
    """A chat approval's stored decision (None: still pending, not stored yet, or an agent
    session's, which its host answers)."""
    if session_id_of(conversation_id) is not None:
        return None
    for row in reversed(await db.messages.list_for_conversation(conversation_id)):
        for part in row.parts if row.role == "assistant" else ():
            approval = part.get("approval")
            if not isinstance(approval, dict) or approval.get("id") != approval_id:
                continue
            if part.get("state") == "approval-requested" or "approved" not in approval:
                return None
            return Verdict(bool(approval["approved"]))
    return None


async def answer_press(
    adapter: ChannelAdapter, press: ButtonPress, text: str, within: float
) -> None:
    """Answer a press to its presser (best effort, bounded)."""
    with anyio.move_on_after(within):
        try:
            await adapter.answer(press, text)
        except Exception as err:
            log.debug("answering a button press failed: %s", err)
