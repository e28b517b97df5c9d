"""Invariant 10 at the row level: an owner that lost its lease writes nothing. A real turn runs
through the dispatcher, the persistent provider (with ``fence_for``), the checkpointer and the
persistence listener on SQLite; another node takes the conversation over mid-answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drupe.admission.base import Submit, TurnSpec
from drupe.admission.dispatch import Dispatcher
from drupe.admission.persistent import PersistentProvider
from drupe.persistence import Database, open_database
from drupe.streaming.checkpoints import Checkpointer, CheckpointPolicy
from drupe.streaming.config import StreamConfig
from drupe.streaming.manager import StreamManager
from drupe.streaming.terminal import SAVE_FAILED
from drupe.testing.recording import RecordingListener
from tests.streaming.sources import Source, text_chunks

EVERY_CHUNK = CheckpointPolicy(interval=30.0, min_bytes=1, max_loss=0.0)
LOST = "node n1 stopped renewing its lease"


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with open_database(f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}") as database:
        yield database


async def test_an_owner_that_lost_its_lease_writes_nothing(db: Database) -> None:
    conversation = (await db.conversations.create()).id
    source = Source(text_chunks("m", ["Kept ", "text", " never stored"]), hold_at=5)

    def runner(spec: TurnSpec) -> AsyncIterator[dict[str, Any]]:
        return source()

    async with (
        Checkpointer(EVERY_CHUNK) as checkpointer,
        StreamManager(StreamConfig(grace_period=30.0)) as manager,
    ):
        provider = PersistentProvider(
            conversations=db.conversations,
            messages=db.messages,
            runner=runner,
            default_model=lambda: "scripted:default",
            checkpointer=checkpointer,
            fence_for={conversation: 1}.get,
        )
        dispatcher = Dispatcher(manager, [provider])
        subscriber = RecordingListener()
        turn = await dispatcher.dispatch(
            Submit(conversation_id=conversation, parts=[{"type": "text", "text": "hi"}]),
            [subscriber],
        )
        answer = turn.placeholder_ids[0]
        await source.reached.wait()
        await checkpointer.wait_idle()
        live = await db.messages.get(answer)
        assert live is not None and (live.status, live.fence) == ("pending", 1)
        assert live.parts[-1] == {"type": "text", "text": "Kept text", "state": "streaming"}

        # Node 1 pauses; its lease expires; node 2 takes the conversation with token 2.
        assert await db.messages.take_over(conversation, fence=2, reason=LOST) == [answer]
        taken = await db.messages.get(answer)
        assert taken is not None and taken.parts == [
            {"type": "step-start"},
            {"type": "text", "text": "Kept text", "state": "done"},
            {"type": "data-error", "data": {"name": "NodeLost", "message": LOST}},
        ]

        # Node 1 resumes: its next checkpoint and its terminal write change nothing.
        source.released.set()
        end = await subscriber.wait_done()
        await manager.wait_settled(conversation)
        await checkpointer.wait_idle()

    assert await db.messages.get(answer) == taken
    assert (end.status, end.error) == ("error", SAVE_FAILED)
