"""The persistent provider writes the node's fencing token into every row a turn writes, and
its placeholders' backends write fenced (SQLite and PostgreSQL, the real provider)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from drupe.admission.approval_service import ApprovalService
from drupe.admission.base import (
    ContinueConversation,
    PreparedDispatch,
    Regenerate,
    SteerContinuation,
    Submit,
    TurnSpec,
)
from drupe.admission.dispatch import Dispatcher
from drupe.admission.persistent import PersistentProvider
from drupe.errors import FencedWriteError
from drupe.persistence import Database, FencedCheckpoints, PlaceholderBackend
from drupe.streaming.approval_rules import Decision
from drupe.streaming.checkpoints import Checkpointer, CheckpointPolicy
from drupe.streaming.listeners.persistence import PersistenceListener
from drupe.streaming.manager import StreamManager
from drupe.streaming.steering import PendingSteer

HELLO = [{"type": "text", "text": "hello"}]


async def _no_model(spec: TurnSpec) -> AsyncIterator[dict[str, Any]]:
    raise AssertionError("prepare never runs the model")
    yield {}  # pragma: no cover


def _provider(
    database: Database, fences: dict[str, int], checkpointer: Checkpointer | None
) -> PersistentProvider:
    return PersistentProvider(
        conversations=database.conversations,
        messages=database.messages,
        runner=_no_model,
        default_model=lambda: "scripted:default",
        checkpointer=checkpointer,
        fence_for=fences.get,
    )


def _backends(prepared: PreparedDispatch) -> list[PlaceholderBackend]:
    backends = []
    for listener in prepared.listeners:
        assert isinstance(listener, PersistenceListener)
        assert isinstance(listener.backend, PlaceholderBackend)
        backends.append(listener.backend)
    return backends


async def test_every_branch_writes_the_nodes_fence(database: Database) -> None:
    fenced = (await database.conversations.create()).id
    plain = (await database.conversations.create()).id
    fences = {fenced: 4}
    async with Checkpointer(CheckpointPolicy()) as checkpointer:
        provider = _provider(database, fences, checkpointer)

        turn = await provider.prepare(
            Submit(conversation_id=fenced, parts=HELLO, model_ids=["a:1", "b:2"]),
            [],
            has_live_stream=False,
        )
        rows = await database.messages.list_for_conversation(fenced)
        assert len(rows) == 3 and {row.fence for row in rows} == {4}
        backends = _backends(turn)
        assert [b.fence for b in backends] == [4, 4]
        sink = backends[0].checkpoint_target
        assert sink is not None and isinstance(sink[0], FencedCheckpoints)
        assert sink[0].fence == 4 and sink[1] == turn.placeholder_ids[0]

        # Steer row, steer continuation, regenerate and approval continuation: all fenced.
        fences[fenced] = 5
        steer = await provider.prepare(
            Submit(conversation_id=fenced, parts=HELLO), [], has_live_stream=True
        )
        assert steer.user_message_id is not None
        continuation = await provider.prepare(
            SteerContinuation(
                conversation_id=fenced,
                steer=PendingSteer(user_message_id=steer.user_message_id, model_id="a:1"),
            ),
            [],
            has_live_stream=False,
        )
        assert turn.user_message_id is not None
        regenerated = await provider.prepare(
            Regenerate(conversation_id=fenced, user_message_id=turn.user_message_id),
            [],
            has_live_stream=False,
        )
        new_rows = [
            steer.user_message_id,
            *continuation.placeholder_ids,
            *regenerated.placeholder_ids,
        ]
        for message_id in new_rows:
            row = await database.messages.get(message_id)
            assert row is not None and row.fence == 5, message_id
        assert [b.fence for b in [*_backends(continuation), *_backends(regenerated)]] == [5, 5]

        answer = turn.placeholder_ids[0]
        await database.messages.finalize_assistant(answer, parts=HELLO, status="success", fence=4)
        fences[fenced] = 6
        resumed = await provider.prepare(
            ContinueConversation(conversation_id=fenced, anchor_id=answer),
            [],
            has_live_stream=False,
        )
        reopened = await database.messages.get(answer)
        assert reopened is not None and (reopened.status, reopened.fence) == ("pending", 6)
        assert [b.fence for b in _backends(resumed)] == [6]

        # A conversation this node holds no token for is written unfenced, as on one node.
        single = await provider.prepare(
            Submit(conversation_id=plain, parts=HELLO), [], has_live_stream=False
        )
        assert {r.fence for r in await database.messages.list_for_conversation(plain)} == {None}
        assert [b.fence for b in _backends(single)] == [None]
        target = _backends(single)[0].checkpoint_target
        assert target is not None and target[0] is database.messages


async def test_a_stale_token_cannot_reopen_a_taken_over_answer(database: Database) -> None:
    conversation = (await database.conversations.create()).id
    fences = {conversation: 1}
    provider = _provider(database, fences, None)
    turn = await provider.prepare(
        Submit(conversation_id=conversation, parts=HELLO), [], has_live_stream=False
    )
    answer = turn.placeholder_ids[0]
    assert await database.messages.take_over(conversation, fence=2, reason="lost") == [answer]

    with pytest.raises(FencedWriteError):
        await provider.prepare(
            ContinueConversation(conversation_id=conversation, anchor_id=answer),
            [],
            has_live_stream=False,
        )
    row = await database.messages.get(answer)
    assert row is not None and (row.status, row.fence) == ("error", 2)


def _approval(approval_id: str) -> dict[str, Any]:
    return {
        "type": "tool-rm",
        "toolCallId": f"call-{approval_id}",
        "state": "approval-requested",
        "input": {},
        "approval": {"id": approval_id},
    }


async def test_approval_decisions_are_a_fenced_write(database: Database) -> None:
    conversation = (await database.conversations.create()).id
    fences = {conversation: 1}
    provider = _provider(database, fences, None)
    turn = await provider.prepare(
        Submit(conversation_id=conversation, parts=HELLO), [], has_live_stream=False
    )
    answer = turn.placeholder_ids[0]
    parts = [_approval("ap1"), _approval("ap2")]
    await database.messages.finalize_assistant(answer, parts=parts, status="success", fence=1)
    async with StreamManager() as manager:
        approvals = ApprovalService(
            Dispatcher(manager, [provider]), database.messages, fence_for=fences.get
        )
        decision = [Decision(approval_id="ap1", approved=True)]
        # Another node took the conversation over (token 2): this node's decision is refused.
        await database.messages.set_pending(answer, parts=parts, fence=2)
        await database.messages.finalize_assistant(answer, parts=parts, status="success", fence=2)
        with pytest.raises(FencedWriteError):
            await approvals.respond(conversation, decision)
        row = await database.messages.get(answer)
        assert row is not None and (row.parts, row.fence) == (parts, 2)

        fences[conversation] = 3  # this node owns the conversation again, with a newer token
        outcome = await approvals.respond(conversation, decision)
        assert (outcome.ok, outcome.continued, outcome.pending) == (True, False, 1)
        row = await database.messages.get(answer)
        assert row is not None and row.fence == 3
        assert row.parts[0]["approval"] == {"id": "ap1", "approved": True}
