"""Turn admission writes: one transaction for the user row and its placeholders, or nothing."""

from __future__ import annotations

import pytest

from drupe.errors import DuplicateModelError, UnknownConversationError, ValidationError
from drupe.persistence import Database, NewMessage, NewPlaceholder


def user(message_id: str, text: str = "hello") -> NewMessage:
    return NewMessage(id=message_id, parts=[{"type": "text", "text": text}])


def placeholders(*pairs: tuple[str, str]) -> list[NewPlaceholder]:
    return [NewPlaceholder(message_id=mid, model_id=model) for mid, model in pairs]


async def test_turn_writes_user_row_and_pending_placeholders(database: Database) -> None:
    conversation = await database.conversations.create(title="t")
    group = await database.messages.next_siblings_group_id(conversation.id)

    await database.messages.create_turn(
        conversation.id,
        user_message=user("u1"),
        parent_id=None,
        placeholders=placeholders(("a1", "m1"), ("a2", "m2")),
        siblings_group_id=group,
    )

    rows = await database.messages.list_for_conversation(conversation.id)
    assert [(r.id, r.role, r.status, r.parent_id, r.model_id) for r in rows] == [
        ("u1", "user", "success", None, None),
        ("a1", "assistant", "pending", "u1", "m1"),
        ("a2", "assistant", "pending", "u1", "m2"),
    ]
    assert rows[0].parts == [{"type": "text", "text": "hello"}]
    assert [r.siblings_group_id for r in rows] == [None, group, group]
    assert all(r.parts == [] for r in rows[1:])
    assert all(r.created_at.utcoffset() is not None for r in rows)
    touched = await database.conversations.get(conversation.id)
    assert touched is not None and touched.updated_at > conversation.updated_at


async def test_turn_user_row_hangs_under_the_given_parent(database: Database) -> None:
    conversation = await database.conversations.create()
    await database.messages.create_turn(
        conversation.id,
        user_message=user("u1"),
        parent_id=None,
        placeholders=placeholders(("a1", "m")),
    )
    await database.messages.create_turn(
        conversation.id,
        user_message=user("u2"),
        parent_id="a1",
        placeholders=placeholders(("a2", "m")),
    )
    assert [r.id for r in await database.messages.path_to("a2")] == ["u1", "a1", "u2", "a2"]


async def test_regenerate_reuses_the_existing_user_row(database: Database) -> None:
    conversation = await database.conversations.create()
    await database.messages.create_turn(
        conversation.id,
        user_message=user("u1"),
        parent_id=None,
        placeholders=placeholders(("a1", "m")),
    )
    await database.messages.create_turn(
        conversation.id,
        user_message=None,
        parent_id="u1",
        placeholders=placeholders(("a1b", "m")),
    )
    regenerated = await database.messages.get("a1b")
    assert regenerated is not None
    assert (regenerated.parent_id, regenerated.status) == ("u1", "pending")
    assert len(await database.messages.list_for_conversation(conversation.id)) == 3


async def test_failed_turn_commits_nothing(database: Database) -> None:
    conversation = await database.conversations.create()
    await database.messages.create_turn(
        conversation.id,
        user_message=user("u1"),
        parent_id=None,
        placeholders=placeholders(("a1", "m")),
    )
    before = await database.messages.list_for_conversation(conversation.id)
    conversation_before = await database.conversations.get(conversation.id)

    # The second placeholder collides with a stored row: the insert fails after the user row
    # and the first placeholder were already sent to the database.
    with pytest.raises(ValidationError):
        await database.messages.create_turn(
            conversation.id,
            user_message=user("u2"),
            parent_id="a1",
            placeholders=placeholders(("a2", "m1"), ("a1", "m2")),
        )

    assert await database.messages.list_for_conversation(conversation.id) == before
    assert await database.conversations.get(conversation.id) == conversation_before
    assert await database.messages.get("u2") is None


async def test_unknown_conversation_raises_and_stores_nothing(database: Database) -> None:
    with pytest.raises(UnknownConversationError) as caught:
        await database.messages.create_turn(
            "nope",
            user_message=user("u1"),
            parent_id=None,
            placeholders=placeholders(("a1", "m")),
        )
    assert caught.value.conversation_id == "nope"
    assert await database.messages.get("u1") is None
    assert await database.messages.get("a1") is None
    with pytest.raises(UnknownConversationError):
        await database.messages.create_user_message("nope", message=user("u9"), parent_id=None)
    with pytest.raises(UnknownConversationError):
        await database.messages.next_siblings_group_id("nope")
    with pytest.raises(UnknownConversationError):
        await database.messages.list_for_conversation("nope")


async def test_bad_turn_input_is_rejected_before_writing(database: Database) -> None:
    conversation = await database.conversations.create()
    with pytest.raises(DuplicateModelError):
        await database.messages.create_turn(
            conversation.id,
            user_message=user("u1"),
            parent_id=None,
            placeholders=placeholders(("a1", "m"), ("a2", "m")),
        )
    with pytest.raises(ValidationError, match="parent"):
        await database.messages.create_turn(
            conversation.id,
            user_message=None,
            parent_id=None,
            placeholders=placeholders(("a1", "m")),
        )
    with pytest.raises(ValidationError, match="parent message 'ghost'"):
        await database.messages.create_turn(
            conversation.id,
            user_message=user("u1"),
            parent_id="ghost",
            placeholders=placeholders(("a1", "m")),
        )
    with pytest.raises(ValidationError, match="more than once"):
        await database.messages.create_turn(
            conversation.id,
            user_message=user("x"),
            parent_id=None,
            placeholders=placeholders(("x", "m")),
        )
    assert await database.messages.list_for_conversation(conversation.id) == []


async def test_parent_from_another_conversation_is_rejected(database: Database) -> None:
    first = await database.conversations.create()
    second = await database.conversations.create()
    await database.messages.create_user_message(first.id, message=user("u1"), parent_id=None)
    with pytest.raises(ValidationError):
        await database.messages.create_user_message(second.id, message=user("u2"), parent_id="u1")
    assert await database.messages.list_for_conversation(second.id) == []


async def test_steer_row_and_its_placeholder(database: Database) -> None:
    conversation = await database.conversations.create()
    steer = await database.messages.create_user_message(
        conversation.id, message=user("s1", "also this"), parent_id=None
    )
    answer = await database.messages.create_placeholder(
        conversation.id, message_id="a1", parent_id="s1", model_id="m", siblings_group_id=3
    )
    assert (steer.status, steer.role) == ("success", "user")
    assert (answer.status, answer.parent_id, answer.siblings_group_id) == ("pending", "s1", 3)
    assert await database.messages.get("s1") == steer


async def test_siblings_group_ids_are_monotonic_per_conversation(database: Database) -> None:
    first = await database.conversations.create()
    second = await database.conversations.create()
    ids = [await database.messages.next_siblings_group_id(first.id) for _ in range(3)]
    assert ids == [1, 2, 3]
    assert await database.messages.next_siblings_group_id(second.id) == 1
    await database.messages.create_turn(
        first.id,
        user_message=user("u1"),
        parent_id=None,
        placeholders=placeholders(("a1", "m1"), ("a2", "m2")),
        siblings_group_id=ids[-1],
    )
    await database.messages.delete(["u1"])  # deleting rows never makes an id come back
    assert await database.messages.next_siblings_group_id(first.id) == 4
