"""The ``Conversations`` port in one process (``drupe.admission.local_conversations``).

* Every call asks the access policy first: a conversation the caller may not see answers
  exactly as an unknown one (``UnknownConversationError``, a 404), for every verb, and a
  refused submit writes nothing.
* A plain submit to an unknown id creates the conversation; a regenerate does not.
* ``follow_turns`` gives a listener every answer of the conversation, whichever surface
  submitted it, until its subscription is closed.
* ``delete`` stops the live answer (its partial persisted) before the rows go.
"""

from __future__ import annotations

import anyio
import pytest

from drupe.admission.access import Action
from drupe.admission.approval_service import ApprovalService
from drupe.admission.base import Regenerate, Submit
from drupe.admission.local_conversations import LocalConversations
from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.errors import UnknownConversationError
from drupe.streaming.approval_rules import Decision
from drupe.streaming.listeners.sse import MultiplexListener, SseListener
from drupe.testing.recording import RecordingListener
from tests.streaming.conftest import Runtime
from tests.streaming.sources import Source, text_chunks

ALICE = Principal(user_id="alice", name="alice")
BOB = Principal(user_id="bob", name="bob")


class OwnersOnly:
    """A policy that lets a caller see only the conversations it is recorded as owning."""

    def __init__(self) -> None:
        self.owners: dict[str, str] = {}
        self.asked: list[tuple[str, str, Action]] = []

    async def check(self, caller: Principal, conversation_id: str, action: Action) -> None:
        self.asked.append((caller.user_id, conversation_id, action))
        owner = self.owners.get(conversation_id)
        if owner is not None and owner != caller.user_id:
            raise UnknownConversationError(conversation_id)

    def owner_for_new(self, caller: Principal) -> str | None:
        return caller.user_id

    def list_filter(self, caller: Principal) -> str | None:
        return caller.user_id


def port(runtime: Runtime, policy: OwnersOnly | None = None) -> LocalConversations:
    return LocalConversations(
        manager=runtime.manager,
        dispatcher=runtime.dispatcher,
        approvals=ApprovalService(runtime.dispatcher, runtime.db.messages),
        conversations=runtime.db.conversations,
        messages=runtime.db.messages,
        ephemeral=runtime.ephemeral,
        sessions=None,
        access=policy,
    )


def submit(conversation_id: str, text: str = "hi") -> Submit:
    return Submit(conversation_id=conversation_id, parts=[{"type": "text", "text": text}])


async def test_another_callers_conversation_is_unknown_for_every_verb(runtime: Runtime) -> None:
    policy = OwnersOnly()
    conversations = port(runtime, policy)
    first = RecordingListener("alice")
    await conversations.submit(ALICE, submit("c1"), subscribers=[first])
    await first.wait_done()
    policy.owners["c1"] = "alice"
    rows_before = await runtime.db.messages.list_for_conversation("c1")

    refused = [
        conversations.submit(BOB, submit("c1", "mine now")),
        conversations.stop(BOB, "c1"),
        conversations.delete(BOB, "c1"),
        conversations.get(BOB, "c1"),
        conversations.approve(BOB, "c1", [Decision(approval_id="a1", approved=True)]),
        conversations.resume(BOB, "c1", SseListener("bob-sse"), None),
        conversations.watch(BOB, "c1", MultiplexListener("bob-events"), None),
        conversations.follow_turns(BOB, "c1", RecordingListener("bob-chat")),
    ]
    for call in refused:
        with pytest.raises(UnknownConversationError):
            await call
    assert await runtime.db.messages.list_for_conversation("c1") == rows_before
    assert {action for caller, _, action in policy.asked if caller == "bob"} == {
        "read",
        "write",
        "delete",
    }
    # The owner still sees it, and an unknown id reads the same as a hidden one.
    assert (await conversations.get(ALICE, "c1")) is not None
    assert ("alice", "c1", "read") in policy.asked
    with pytest.raises(UnknownConversationError):
        await conversations.get(BOB, "nosuch")


async def test_a_submit_creates_the_conversation_and_a_regenerate_does_not(
    runtime: Runtime,
) -> None:
    conversations = port(runtime)
    with pytest.raises(UnknownConversationError):
        await conversations.submit(
            LOCAL_ADMIN, Regenerate(conversation_id="new", user_message_id="u1")
        )
    assert await runtime.db.conversations.get("new") is None
    listener = RecordingListener("r")
    admitted = await conversations.submit(LOCAL_ADMIN, submit("new"), subscribers=[listener])
    await listener.wait_done()
    assert admitted.result.mode == "started"
    assert await runtime.db.conversations.get("new") is not None


async def test_follow_turns_gets_every_answer_until_closed(runtime: Runtime) -> None:
    conversations = port(runtime)
    setup = RecordingListener("setup")
    await conversations.submit(LOCAL_ADMIN, submit("chat"), subscribers=[setup])
    await setup.wait_done()
    chat = RecordingListener("chat-listener")
    subscription = await conversations.follow_turns(LOCAL_ADMIN, "chat", chat)
    other = RecordingListener("web-tab")
    # A submit from another surface (no listener of the chat's own) reaches the chat.
    await conversations.submit(LOCAL_ADMIN, submit("chat", "from the web"), subscribers=[other])
    await other.wait_done()
    with anyio.fail_after(5):
        await chat.wait_done()
    assert "fine thanks" in "".join(str(c.get("delta", "")) for c in chat.chunks())
    subscription.close()
    later = RecordingListener("later")
    before = len(chat.events)
    await conversations.submit(LOCAL_ADMIN, submit("chat", "again"), subscribers=[later])
    await later.wait_done()
    assert len(chat.events) == before


async def test_delete_stops_the_live_answer_before_the_rows_go(runtime: Runtime) -> None:
    conversations = port(runtime)
    source = runtime.script(
        "scripted:default", Source(text_chunks("m", ["a", "b", "c"]), hold_at=3)
    )
    listener = RecordingListener("r")
    await conversations.submit(LOCAL_ADMIN, submit("gone"), subscribers=[listener])
    with anyio.fail_after(5):
        await source.reached.wait()
    assert runtime.manager.is_live("gone")
    await conversations.delete(LOCAL_ADMIN, "gone")
    assert not runtime.manager.is_live("gone")
    assert source.closed.is_set()
    assert await runtime.db.conversations.get("gone") is None
