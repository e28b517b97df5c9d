"""Invariant 4 (one admission at a time per conversation) must bite: concurrent submits to one
idle conversation start ONE turn and queue the other as a steer; nothing is refused and no
``pending`` row is left behind. Without the per-conversation lock in ``Dispatcher.dispatch``
both submits prepare a start, the second ``send`` is refused ``busy`` and its placeholder row
stays ``pending`` forever. HTTP: ``tests/gateway/test_concurrent_submits.py``."""

from __future__ import annotations

import anyio

from drupe.admission.base import Submit
from drupe.admission.dispatch import DispatchResult
from drupe.testing.recording import RecordingListener
from tests.streaming.conftest import Runtime
from tests.streaming.sources import Source, text_chunks

HELLO = [{"type": "text", "text": "hello"}]


async def test_concurrent_submits_through_the_dispatcher_start_one_turn_and_queue_the_rest(
    runtime: Runtime,
) -> None:
    cid = (await runtime.db.conversations.create()).id
    held = runtime.script("scripted:default", Source(text_chunks("m", ["first"]), hold_at=2))
    results: list[DispatchResult] = []
    failures: list[BaseException] = []

    tabs = [RecordingListener(f"tab{index}") for index in range(3)]

    async def submit(index: int) -> None:
        parts = [{"type": "text", "text": f"message {index}"}]
        try:
            results.append(
                await runtime.dispatcher.dispatch(
                    Submit(conversation_id=cid, parts=parts), [tabs[index]]
                )
            )
        except Exception as err:  # collected: the assertion below names it
            failures.append(err)

    async with anyio.create_task_group() as tg:
        for index in range(3):
            tg.start_soon(submit, index)
    assert failures == []
    assert sorted(r.mode for r in results) == ["injected", "injected", "started"]
    held.released.set()
    with anyio.fail_after(10):
        for tab in tabs:  # the subscribers are carried to the end of the last continuation
            await tab.wait_done()
        await runtime.manager.wait_settled(cid)
    rows = await runtime.db.messages.list_for_conversation(cid)
    assert [r.status for r in rows if r.status == "pending"] == []
    users = [r for r in rows if r.role == "user"]
    answers = [r for r in rows if r.role == "assistant"]
    assert len(users) == 3 and len(answers) == 3
    # Every user message is answered exactly once, on one line.
    assert sorted(a.parent_id or "" for a in answers) == sorted(u.id for u in users)
