"""Answers survive: checkpoints while live, empty successes, failing and slow terminal writes,
rejected chunks. Real stream manager, real SQLite store, real persistence listener; the only
stand-ins are chunk sources and, for failing writes, a store subclass that fails N times."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from drupe.chunks.rejections import REJECTED_PART_ID
from drupe.errors import PersistenceError
from drupe.persistence.backends import PlaceholderBackend
from drupe.persistence.db import Database, open_database
from drupe.persistence.messages import MessageStore
from drupe.persistence.reconcile import RESTART_ERROR
from drupe.persistence.records import NewMessage, NewPlaceholder, TerminalStatus
from drupe.streaming.checkpoints import Checkpointer, CheckpointPolicy
from drupe.streaming.config import StreamConfig
from drupe.streaming.listeners.base import TerminalResult
from drupe.streaming.listeners.persistence import PersistenceListener
from drupe.streaming.manager import ExecutionSpec, SendInput, StreamManager
from drupe.streaming.terminal import SAVE_FAILED
from drupe.streaming.terminal_writes import TerminalWriteRetrier, WritePolicy
from drupe.testing.recording import RecordingListener
from tests.streaming.sources import Source, text_chunks

# Failures are injected exceptions, so a generous attempt bound costs nothing and keeps a real
# SQLite write on a loaded machine from counting as a failed attempt.
FAST = WritePolicy(
    attempt_timeout=5.0,
    delays=(0.0, 0.0),
    budget=20.0,
    background_first_delay=0.0,
    background_attempts=3,
)
"""Three foreground attempts with no pause; background retries with no pause."""

EVERY_CHUNK = CheckpointPolicy(interval=30.0, min_bytes=1, max_loss=0.0)
"""Every change is due at once (the interval never decides here)."""


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with open_database(f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}") as database:
        yield database


async def _placeholder(db: Database) -> tuple[str, str]:
    conversation = (await db.conversations.create()).id
    row = "msg_answer"
    await db.messages.create_turn(
        conversation,
        user_message=NewMessage(id="msg_user", parts=[{"type": "text", "text": "hi"}]),
        parent_id=None,
        placeholders=[NewPlaceholder(message_id=row, model_id="m")],
    )
    return conversation, row


class FlakyStore(MessageStore):
    """The real SQLite message store, whose terminal writes fail (or hang) the first N times."""

    def __init__(self, real: MessageStore, *, failures: int = 0, hangs: int = 0) -> None:
        super().__init__(real._transactions, dialect=real.dialect)
        self.failures = failures
        self.hangs = hangs
        self.attempts = 0

    async def finalize_assistant(
        self,
        message_id: str,
        *,
        parts: Sequence[Mapping[str, Any]],
        status: TerminalStatus,
        metadata: Mapping[str, Any] | None = None,
        stats: Mapping[str, Any] | None = None,
        model_id: str | None = None,
        runtime_resume_token: str | None = None,
        fence: int | None = None,
    ) -> None:
        self.attempts += 1
        if self.hangs > 0:
            self.hangs -= 1
            await anyio.sleep_forever()
        if self.failures > 0:
            self.failures -= 1
            raise PersistenceError("database operation failed: disk I/O error")
        await super().finalize_assistant(
            message_id,
            parts=parts,
            status=status,
            metadata=metadata,
            stats=stats,
            model_id=model_id,
            runtime_resume_token=runtime_resume_token,
            fence=fence,
        )


def _send(
    manager: StreamManager, conversation: str, row: str, source: Source, *listeners: Any
) -> None:
    manager.send(
        SendInput(
            conversation_id=conversation,
            executions=[ExecutionSpec(model_id="m", source=source, anchor_message_id=row)],
            listeners=list(listeners),
        )
    )


# --- checkpoints ----------------------------------------------------------------------------


async def test_live_answer_is_checkpointed_into_its_pending_row(db: Database) -> None:
    conversation, row = await _placeholder(db)
    words = ["The ", "answer ", "so ", "far"]
    source = Source(text_chunks(row, [*words, " and more"]), hold_at=3 + len(words))
    async with Checkpointer(EVERY_CHUNK) as checkpointer, StreamManager() as manager:
        listener = PersistenceListener(
            PlaceholderBackend(db.messages, row),
            model_id="m",
            conversation_id=conversation,
            checkpointer=checkpointer,
        )
        _send(manager, conversation, row, source, listener)
        await source.reached.wait()
        await checkpointer.wait_idle()
        stored = await db.messages.get(row)
        assert stored is not None and stored.status == "pending"
        assert stored.parts == [
            {"type": "step-start"},
            {"type": "text", "text": "The answer so far", "state": "streaming"},
        ]
        # The process dies here: the boot reconcile keeps the text, closed as interrupted.
        assert await db.messages.reconcile_pending() == 1
        source.released.set()
        await manager.wait_settled(conversation)
    # (the terminal write then settles the row that the reconcile already closed)


async def test_reconcile_after_a_crash_keeps_the_checkpointed_text(db: Database) -> None:
    conversation, row = await _placeholder(db)
    source = Source(text_chunks(row, ["Kept ", "text"]), hang_at=5)
    async with Checkpointer(EVERY_CHUNK) as checkpointer, StreamManager() as manager:
        listener = PersistenceListener(
            PlaceholderBackend(db.messages, row),
            model_id="m",
            conversation_id=conversation,
            checkpointer=checkpointer,
        )
        _send(manager, conversation, row, source, listener)
        await source.reached.wait()
        await checkpointer.wait_idle()
        # A crash now: nothing but the reconcile runs before the next boot.
        assert await db.messages.reconcile_pending() == 1
        stored = await db.messages.get(row)
        assert stored is not None and stored.status == "error"
        assert stored.parts == [
            {"type": "step-start"},
            {"type": "text", "text": "Kept text", "state": "done"},
            {"type": "data-error", "data": RESTART_ERROR},
        ]
        manager.abort(conversation)
        await manager.wait_settled(conversation)


async def test_checkpoints_of_many_chunks_are_coalesced_into_one_write(db: Database) -> None:
    conversation, row = await _placeholder(db)
    words = [f"w{i} " for i in range(200)]
    source = Source(text_chunks(row, words), hold_at=3 + len(words))
    policy = CheckpointPolicy(interval=0.05, min_bytes=10**9)
    async with Checkpointer(policy) as checkpointer, StreamManager() as manager:
        listener = PersistenceListener(
            PlaceholderBackend(db.messages, row),
            model_id="m",
            conversation_id=conversation,
            checkpointer=checkpointer,
        )
        _send(manager, conversation, row, source, listener)
        await source.reached.wait()  # 200 deltas published with no await in between
        await checkpointer.wait_idle()
        # 200 deltas, one or two writes: on a loaded machine the interval may pass while the
        # loop is between the opening chunks and the deltas, which costs one more write.
        assert 1 <= checkpointer.batches_written <= 2
        assert checkpointer.rows_written == checkpointer.batches_written
        stored = await db.messages.get(row)
        assert stored is not None and stored.parts[-1]["text"] == "".join(words)
        source.released.set()
        await manager.wait_settled(conversation)
    final = await db.messages.get(row)
    assert final is not None and final.status == "success"
    assert final.parts[-1] == {"type": "text", "text": "".join(words), "state": "done"}


# --- empty successes ------------------------------------------------------------------------


async def test_empty_success_finalizes_the_placeholder(db: Database) -> None:
    conversation, row = await _placeholder(db)
    async with StreamManager() as manager:
        listener = PersistenceListener(
            PlaceholderBackend(db.messages, row), model_id="m", conversation_id=conversation
        )
        _send(manager, conversation, row, Source([]), listener)
        await manager.wait_settled(conversation)
    stored = await db.messages.get(row)
    assert stored is not None
    assert (stored.status, stored.parts) == ("success", [])


# --- failing and slow terminal writes -------------------------------------------------------


async def test_terminal_write_that_fails_twice_is_retried_and_succeeds(db: Database) -> None:
    conversation, row = await _placeholder(db)
    flaky = FlakyStore(db.messages, failures=2)
    tab = RecordingListener("tab")
    async with StreamManager() as manager:
        listener = PersistenceListener(
            PlaceholderBackend(flaky, row),
            model_id="m",
            conversation_id=conversation,
            write_policy=FAST,
        )
        _send(manager, conversation, row, Source(text_chunks(row, ["saved"])), listener, tab)
        await manager.wait_settled(conversation)
    stored = await db.messages.get(row)
    assert stored is not None and stored.status == "success"
    assert stored.parts[-1]["text"] == "saved"
    assert flaky.attempts == 3
    assert [t.status for t in tab.terminals] == ["success"]  # not suppressed


async def test_terminal_write_that_keeps_failing_is_retried_until_written(db: Database) -> None:
    conversation, row = await _placeholder(db)
    flaky = FlakyStore(db.messages, failures=5)  # 3 foreground attempts fail, then 2 more
    async with TerminalWriteRetrier(FAST) as retrier, StreamManager() as manager:
        listener = PersistenceListener(
            PlaceholderBackend(flaky, row),
            model_id="m",
            conversation_id=conversation,
            retrier=retrier,
        )
        _send(manager, conversation, row, Source(text_chunks(row, ["late"])), listener)
        await manager.wait_settled(conversation)
        await retrier.wait_idle()
        assert (retrier.succeeded, retrier.left_error) == (1, 0)
    stored = await db.messages.get(row)
    assert stored is not None and stored.status == "success"
    assert stored.parts[-1]["text"] == "late"
    assert flaky.attempts == 6


async def test_terminal_write_that_never_succeeds_leaves_the_row_error(db: Database) -> None:
    conversation, row = await _placeholder(db)
    flaky = FlakyStore(db.messages, failures=10**6)
    async with TerminalWriteRetrier(FAST) as retrier, StreamManager() as manager:
        listener = PersistenceListener(
            PlaceholderBackend(flaky, row),
            model_id="m",
            conversation_id=conversation,
            retrier=retrier,
        )
        _send(manager, conversation, row, Source(text_chunks(row, ["lost"])), listener)
        await manager.wait_settled(conversation)
        await retrier.wait_idle()
        assert (retrier.succeeded, retrier.left_error) == (0, 1)
    stored = await db.messages.get(row)
    assert stored is not None and stored.status == "error"  # never left pending


async def test_slow_terminal_write_is_cancelled_and_retried(db: Database) -> None:
    conversation, row = await _placeholder(db)
    flaky = FlakyStore(db.messages, hangs=1)
    hang_bound = WritePolicy(attempt_timeout=0.5, delays=(0.0, 0.0, 0.0), budget=8.0)
    # The manager's bound (12 s) is far above the attempt bound (0.5 s): the retry is ours.
    async with StreamManager(StreamConfig(terminal_timeout=12.0)) as manager:
        listener = PersistenceListener(
            PlaceholderBackend(flaky, row),
            model_id="m",
            conversation_id=conversation,
            write_policy=hang_bound,
        )
        _send(manager, conversation, row, Source(text_chunks(row, ["slow"])), listener)
        await manager.wait_settled(conversation)
    stored = await db.messages.get(row)
    assert stored is not None and stored.status == "success"
    assert stored.parts[-1]["text"] == "slow"
    assert flaky.attempts >= 2  # the hung attempt was cancelled; a later one wrote the row


# --- rejected chunks ------------------------------------------------------------------------


async def test_rejected_chunk_is_recorded_and_later_chunks_are_persisted(db: Database) -> None:
    conversation, row = await _placeholder(db)
    chunks = [
        {"type": "start", "messageId": row},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "before "},
        {"type": "text-delta", "id": "unknown", "delta": "???"},  # no text-start: rejected
        {"type": "text-delta", "id": "t1", "delta": "after"},
        {"type": "text-end", "id": "t1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]
    tab = RecordingListener("tab")
    async with Checkpointer(EVERY_CHUNK) as checkpointer, StreamManager() as manager:
        listener = PersistenceListener(
            PlaceholderBackend(db.messages, row),
            model_id="m",
            conversation_id=conversation,
            checkpointer=checkpointer,
        )
        _send(manager, conversation, row, Source(chunks), listener, tab)
        await manager.wait_settled(conversation)
    stored = await db.messages.get(row)
    assert stored is not None and stored.status == "success"
    assert stored.parts[1] == {"type": "text", "text": "before after", "state": "done"}
    errors = [p for p in stored.parts if p["type"] == "data-error"]
    assert len(errors) == 1
    assert errors[0]["id"] == REJECTED_PART_ID
    assert errors[0]["data"]["name"] == "AccumulateError"
    assert errors[0]["data"]["rejectedChunks"] == 1
    assert tab.chunks() == chunks  # every chunk still went out


# --- terminal work past its bound -----------------------------------------------------------


class _HangingEnd(RecordingListener):
    """A subscriber whose terminal callback never returns (a dead socket, a stuck store)."""

    async def on_done(self, result: TerminalResult) -> None:
        await anyio.sleep(3600)


async def test_terminal_work_past_its_bound_is_cut_and_the_manager_goes_on() -> None:
    """A listener's terminal callback that hangs past ``terminal_timeout`` is cut off and
    logged; the listeners after it still get their terminal, the execution settles, and the
    manager goes on streaming other conversations."""
    async with StreamManager(StreamConfig(terminal_timeout=0.2)) as manager:
        first, hanging, last = (
            RecordingListener("first"),
            _HangingEnd("hang"),
            RecordingListener("last"),
        )
        source = Source(text_chunks("row1", ["one"]))
        _send(manager, "c1", "row1", source, first, hanging, last)
        with anyio.fail_after(10):
            await manager.wait_settled("c1")
        assert [t.status for t in first.terminals] == ["success"]
        assert [t.status for t in last.terminals] == ["success"]  # heard its end too
        assert manager.save_failures == 0
        tab = RecordingListener("tab")
        _send(manager, "c2", "row2", Source(text_chunks("row2", ["two"])), tab)
        with anyio.fail_after(10):
            await manager.wait_settled("c2")
        assert [t.status for t in tab.terminals] == ["success"]


async def test_a_final_save_cut_off_at_the_bound_is_told_to_subscribers_as_failed() -> None:
    """The persistence listener's final save hangs past the bound: the subscribers hear that
    the answer could not be saved (as for a save that failed), not nothing."""
    async with StreamManager(StreamConfig(terminal_timeout=0.2)) as manager:
        saving = _HangingEnd("save", terminal_phase="persistence")
        tab = RecordingListener("tab")
        _send(manager, "c1", "row1", Source(text_chunks("row1", ["one"])), saving, tab)
        with anyio.fail_after(10):
            await manager.wait_settled("c1")
        assert [(t.status, t.error) for t in tab.terminals] == [("error", SAVE_FAILED)]
        assert manager.save_failures == 1
