"""Concurrent admission writes are committed in batches, with the one-write results and errors.

Turn rows (``create_turn``), new conversations (``create``) and first titles
(``title_if_untitled``) issued together land in fewer transactions than calls
(``WriteBatches.batches``), yet each caller gets exactly what it got alone: its rows committed on
return, or its own error with nothing of it written, while the others of its batch still land.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from drupe.errors import UnknownConversationError, ValidationError
from drupe.persistence import Database, NewMessage, NewPlaceholder
from drupe.persistence.write_batches import WriteBatches

N = 30


async def _turn(database: Database, conversation_id: str, n: int, parent: str | None) -> None:
    await database.messages.create_turn(
        conversation_id,
        user_message=NewMessage(id=f"u{n}", parts=[{"type": "text", "text": str(n)}]),
        parent_id=parent,
        placeholders=[NewPlaceholder(message_id=f"a{n}", model_id="m1")],
    )


async def test_turns_together_land_in_batches_and_a_bad_one_fails_alone(
    database: Database,
) -> None:
    conversations = [(await database.conversations.create()).id for _ in range(N)]
    await _turn(database, conversations[0], 1000, None)  # a parent for one turn below
    errors: dict[int, Exception] = {}

    async def one(n: int) -> None:
        conversation_id, parent = conversations[n], None
        if n == 7:
            conversation_id = "conv_missing"
        if n == 11:
            parent = "u1000"  # in conversations[0], not in conversations[11]
        if n == 0:
            parent = "u1000"
        try:
            await _turn(database, conversation_id, n, parent)
        except (UnknownConversationError, ValidationError) as err:
            errors[n] = err
        else:  # committed on return: a fresh read sees the rows
            rows = await database.messages.list_for_conversation(conversation_id)
            assert {f"u{n}", f"a{n}"} <= {r.id for r in rows}

    async with anyio.create_task_group() as tg:
        for n in range(N):
            tg.start_soon(one, n)

    assert sorted(errors) == [7, 11]
    assert isinstance(errors[7], UnknownConversationError)
    assert "is not in conversation" in str(errors[11])
    assert await database.messages.get("u11") is None
    assert await database.messages.get("a7") is None
    first = await database.messages.get("u0")
    assert first is not None and first.parent_id == "u1000"
    for n in set(range(N)) - {7, 11}:
        assert (await database.messages.get(f"a{n}")) is not None
    # The batch holding turns 7 and 11 was refused and written turn by turn; good turns together
    # share transactions.
    before = database.messages.turn_writes.batches
    async with anyio.create_task_group() as tg:
        for n in range(N):
            tg.start_soon(
                _turn, database, conversations[n], N + n, f"a{n}" if n not in (7, 11) else None
            )
    assert database.messages.turn_writes.batches > before
    for n in range(N):
        row = await database.messages.get(f"u{N + n}")
        assert row is not None and row.parent_id == (f"a{n}" if n not in (7, 11) else None)


async def test_creates_and_titles_together(database: Database) -> None:
    taken = (await database.conversations.create("conv_taken")).id
    created: list[str] = []
    refused: list[str] = []

    async def create(conversation_id: str) -> None:
        try:
            created.append((await database.conversations.create(conversation_id)).id)
        except ValidationError:
            refused.append(conversation_id)

    ids = [f"conv_{n}" for n in range(N)]
    async with anyio.create_task_group() as tg:
        for conversation_id in [*ids, taken]:
            tg.start_soon(create, conversation_id)
    assert sorted(created) == sorted(ids) and refused == [taken]

    titled: dict[tuple[str, str], bool] = {}

    async def title(conversation_id: str, text: str) -> None:
        titled[conversation_id, text] = await database.conversations.title_if_untitled(
            conversation_id, text
        )

    await database.conversations.rename(ids[0], "kept")  # a rename wins
    async with anyio.create_task_group() as tg:
        for n, conversation_id in enumerate(ids):
            tg.start_soon(title, conversation_id, f"t{n}")
        tg.start_soon(title, ids[1], "second")  # the same conversation twice: one wins
    assert titled[ids[0], "t0"] is False
    assert [titled[ids[1], "t1"], titled[ids[1], "second"]].count(True) == 1
    for n, conversation_id in enumerate(ids[2:], start=2):
        assert titled[conversation_id, f"t{n}"] is True
        record = await database.conversations.get(conversation_id)
        assert record is not None and record.title == f"t{n}"
    first = await database.conversations.get(ids[0])
    assert first is not None and first.title == "kept"


async def test_a_caller_cancelled_while_queued_writes_nothing() -> None:
    written: list[int] = []
    gate = anyio.Event()

    async def single(item: int) -> None:
        if item == 0:
            await gate.wait()
        written.append(item)

    async def batch(items: Sequence[int]) -> list[None]:
        raise AssertionError("not reached: the queued caller left")

    batches: WriteBatches[int, None] = WriteBatches(single, batch)
    async with anyio.create_task_group() as tg:
        tg.start_soon(batches.run, 0)
        await anyio.wait_all_tasks_blocked()
        with anyio.move_on_after(0) as scope:
            scope.cancel()
            await batches.run(1)
        gate.set()
    assert written == [0]


@pytest.mark.parametrize("fail", [False, True])
async def test_a_failed_batch_is_written_one_by_one(fail: bool) -> None:
    written: list[int] = []
    gate = anyio.Event()

    async def single(item: int) -> int:
        if item == 0:
            await gate.wait()
        if item == 2:
            raise ValueError("two")
        written.append(item)
        return item * 10

    async def batch(items: Sequence[int]) -> list[int]:
        if fail or 2 in items:
            raise RuntimeError("the batch writes nothing")
        written.extend(items)
        return [i * 10 for i in items]

    batches: WriteBatches[int, int] = WriteBatches(single, batch)
    results: dict[int, object] = {}

    async def run(item: int) -> None:
        try:
            results[item] = await batches.run(item)
        except ValueError as err:
            results[item] = err

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, 0)
        await anyio.wait_all_tasks_blocked()
        for item in (1, 2, 3):
            tg.start_soon(run, item)
        await anyio.wait_all_tasks_blocked()
        gate.set()
    assert results[0] == 0 and results[1] == 10 and results[3] == 30
    assert isinstance(results[2], ValueError)
    assert sorted(written) == [0, 1, 3]
    assert batches.batches == 0  # items 1-3 were one batch; it failed, so each went alone
