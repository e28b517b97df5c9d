"""DESIGN.md invariants and the public API's typed errors, against the real parts."""

from __future__ import annotations

import anyio
import pytest

from drupe.admission.base import Regenerate, Submit
from drupe.errors import (
    AdmissionError,
    DuplicateModelError,
    UnknownConversationError,
    ValidationError,
)
from drupe.streaming.config import StreamConfig
from drupe.streaming.listeners.persistence import PersistenceListener
from drupe.streaming.manager import AttachFinished, ExecutionSpec, SendInput, StreamManager
from drupe.testing.recording import RecordingBackend, RecordingListener
from tests.streaming.conftest import Runtime
from tests.streaming.sources import Source, text_chunks

HELLO = [{"type": "text", "text": "hello"}]


async def _snapshot(rt: Runtime, cid: str) -> list[tuple[str, str, str]]:
    return [(r.id, r.role, r.status) for r in await rt.db.messages.list_for_conversation(cid)]


async def test_unknown_conversation_raises_and_writes_nothing(runtime: Runtime) -> None:
    with pytest.raises(UnknownConversationError):
        await runtime.dispatcher.dispatch(Submit(conversation_id="nope", parts=HELLO))
    assert runtime.manager.get("nope") is None


async def test_duplicate_model_raises_before_any_write(runtime: Runtime) -> None:
    cid = (await runtime.db.conversations.create()).id
    with pytest.raises(DuplicateModelError):
        await runtime.dispatcher.dispatch(
            Submit(conversation_id=cid, parts=HELLO, model_ids=["scripted:a", "scripted:a"])
        )
    assert await _snapshot(runtime, cid) == []


async def test_unknown_model_and_empty_message_are_validation_errors(runtime: Runtime) -> None:
    cid = (await runtime.db.conversations.create()).id
    with pytest.raises(ValidationError, match="unknown model"):
        await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO, model_ids=["x"]))
    with pytest.raises(ValidationError, match="empty"):
        await runtime.dispatcher.dispatch(
            Submit(conversation_id=cid, parts=[{"type": "text", "text": "  "}])
        )
    assert await _snapshot(runtime, cid) == []


async def test_regenerate_on_live_conversation_is_refused_and_changes_nothing(
    runtime: Runtime,
) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=1))
    first = await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    before = await _snapshot(runtime, cid)
    with pytest.raises(AdmissionError) as info:
        await runtime.dispatcher.dispatch(
            Regenerate(conversation_id=cid, user_message_id=first.user_message_id or "")
        )
    assert info.value.reason == "regenerate-live"
    assert await _snapshot(runtime, cid) == before
    src.released.set()
    await runtime.manager.wait_settled(cid)


async def test_invariant_1_live_submit_never_starts_a_second_stream(runtime: Runtime) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=1))
    first = await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    stream = runtime.manager.get(cid)
    tab = RecordingListener("wc:2")
    second = await runtime.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=[{"type": "text", "text": "also"}]), [tab]
    )
    assert second.mode == "injected" and second.steer == "queue"
    assert runtime.manager.get(cid) is stream
    assert runtime.manager.steers.pending(cid)[0].user_message_id == second.user_message_id
    assert "wc:2" in stream.listeners  # type: ignore[union-attr]
    with pytest.raises(AdmissionError):
        runtime.manager.send(
            SendInput(
                conversation_id=cid,
                executions=[ExecutionSpec(model_id="m", source=Source([]))],
            )
        )
    rows = await _snapshot(runtime, cid)
    assert [role for _, role, _ in rows] == ["user", "assistant", "user"]
    assert first.placeholder_ids[0] == rows[1][0]
    # the steer is answered after the running turn (scenario 15's manager side)
    src.released.set()
    with anyio.fail_after(5):
        done = await tab.wait_done()  # carried into the continuation, done when it ends
    assert [t.is_conversation_done for t in tab.terminals] == [False, True]
    assert done.anchor_message_id != first.placeholder_ids[0]
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert rows[3].parent_id == second.user_message_id and rows[3].status == "success"
    assert runtime.specs[-1].is_steer is True


async def test_invariant_2_attach_and_detach_never_change_the_stream() -> None:
    async with StreamManager() as manager:
        src = Source(text_chunks("m", ["a", "b", "c"]), hold_at=4)
        keeper = RecordingListener("keeper")
        manager.send(
            SendInput(
                conversation_id="c",
                executions=[ExecutionSpec(model_id="m", source=src)],
                listeners=[keeper],
            )
        )
        await src.reached.wait()
        for i in range(5):
            manager.attach("c", RecordingListener(f"tab{i}"))
            manager.detach("c", f"tab{i}")
        manager.detach("c", "keeper")
        assert manager.is_live("c")
        src.released.set()
        await manager.wait_settled("c")
        assert manager.get("c").executions["m"].terminal_status == "success"  # type: ignore[union-attr]


async def test_stale_attempt_chunks_are_dropped() -> None:
    async with StreamManager() as manager:
        old = Source(text_chunks("m", ["old"] * 5), hold_at=3)
        manager.send(
            SendInput(conversation_id="c", executions=[ExecutionSpec(model_id="m", source=old)])
        )
        await old.reached.wait()
        old_stream = manager.get("c")
        manager.abort("c")  # not awaited: the old loop is still running
        new = Source(text_chunks("n", ["new"]))
        rec = RecordingListener("tab")
        manager.send(
            SendInput(
                conversation_id="c",
                executions=[ExecutionSpec(model_id="m", source=new)],
                listeners=[rec],
            )
        )
        old.released.set()
        await rec.wait_done()
        assert old_stream is not manager.get("c")
        assert all(e.attempt_id == rec.events[0].attempt_id for e in rec.events)
        assert "old" not in str(rec.message())
        assert old_stream.executions["m"].chunk_count == 3  # type: ignore[union-attr]


async def test_throwing_listener_is_isolated_and_terminal_order_is_persistence_first() -> None:
    async with StreamManager() as manager:
        order: list[str] = []

        class Ordered(RecordingListener):
            async def on_done(self, result):  # type: ignore[no-untyped-def]
                order.append(self.listener_id)
                await super().on_done(result)

        bad = RecordingListener("bad", raise_on_chunk=True)
        good = Ordered("good")
        cleanup = Ordered("cleanup", terminal_phase="cleanup")
        persist = Ordered("persist", terminal_phase="persistence")
        manager.send(
            SendInput(
                conversation_id="c",
                executions=[ExecutionSpec(model_id="m", source=Source(text_chunks("m", ["x"])))],
                listeners=[cleanup, bad, good, persist],
            )
        )
        await good.wait_done()
        assert order == ["persist", "good", "cleanup"]
        assert "bad" not in manager.get("c").listeners  # type: ignore[union-attr]
        assert good.message()["parts"][-1]["text"] == "x"


async def test_failed_final_save_ends_subscribers_with_an_error_and_keeps_the_message() -> None:
    async with StreamManager() as manager:
        backend = RecordingBackend(fail=True)
        persist = PersistenceListener(backend, model_id="m", conversation_id="c")
        tab = RecordingListener("tab")
        cleanup = RecordingListener("cleanup", terminal_phase="cleanup")
        manager.send(
            SendInput(
                conversation_id="c",
                executions=[ExecutionSpec(model_id="m", source=Source(text_chunks("m", ["x"])))],
                listeners=[persist, tab, cleanup],
            )
        )
        with anyio.fail_after(5):
            await tab.wait_done()  # the subscriber hears an end instead of hanging
        await cleanup.wait_done()
        assert backend.marked_error == 1
        assert [t.status for t in tab.terminals] == ["error"]
        assert tab.terminals[0].error == {
            "name": "TerminalPersistenceError",
            "message": "the answer could not be saved",
        }
        assert cleanup.statuses() == ["success"]  # cleanup still sees what really happened
        assert manager.statistics()["save_failures"] == 1
        # The message stays in memory for the grace period: a late reader still gets it.
        finished = manager.attach("c", RecordingListener("late"))
        assert isinstance(finished, AttachFinished)
        assert finished.final_messages["m"]["parts"][-1]["text"] == "x"
        assert finished.error is not None and finished.error["name"] == "TerminalPersistenceError"
        late = RecordingListener("late-sse")
        assert await manager.subscriptions.replay_ended("c", late, execution_id="m")
        assert late.message()["parts"][-1]["text"] == "x"
        assert [t.status for t in late.terminals] == ["error"]


@pytest.mark.parametrize("stream_config", [StreamConfig(max_listeners=2)])
async def test_subscriber_cap_is_explicit(runtime: Runtime) -> None:
    cid = (await runtime.db.conversations.create()).id
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=1))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    runtime.manager.attach(cid, RecordingListener("a"))
    runtime.manager.attach(cid, RecordingListener("b"))
    with pytest.raises(AdmissionError) as info:
        runtime.manager.attach(cid, RecordingListener("c"))
    assert info.value.reason == "too-many-subscribers"
    src.released.set()
    await runtime.manager.wait_settled(cid)


async def test_ephemeral_conversation_rejects_live_submit_and_regenerate(runtime: Runtime) -> None:
    cid = runtime.ephemeral.create()
    src = runtime.script("scripted:default", Source(text_chunks("m", ["a"]), hold_at=1))
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    await src.reached.wait()
    with pytest.raises(AdmissionError) as info:
        await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO))
    assert info.value.reason == "live"
    with pytest.raises(AdmissionError):
        await runtime.dispatcher.dispatch(Regenerate(conversation_id=cid, user_message_id="x"))
    src.released.set()
    await runtime.manager.wait_settled(cid)
    rows = runtime.ephemeral.get(cid).rows  # type: ignore[union-attr]
    assert [r.status for r in rows] == ["success", "success"]
    assert rows[1].message["parts"][-1]["text"] == "a"
    assert await runtime.db.conversations.get(cid) is None  # never persisted
