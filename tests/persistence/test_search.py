"""``SearchStore`` on SQLite (FTS5) and PostgreSQL (tsvector): titles and message text."""

from __future__ import annotations

import pytest

from drupe.errors import ValidationError
from drupe.persistence import Database, NewMessage
from drupe.persistence.search import fts5_query, search_terms, snippet_segments, tsquery


def _text(value: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": value}]


async def _say(database: Database, conversation_id: str, message_id: str, value: str) -> None:
    await database.messages.create_user_message(
        conversation_id, message=NewMessage(id=message_id, parts=_text(value)), parent_id=None
    )


def test_terms_are_the_words_lowercased_once_each() -> None:
    assert search_terms('Deploy the "Kubernetes" deploy; café!') == [
        "deploy",
        "the",
        "kubernetes",
        "café",
    ]
    assert search_terms("  -- ") == []
    assert fts5_query(["a", "b"]) == '"a"* "b"*'
    assert tsquery(["a", "b"]) == "'a':* & 'b':*"
    assert snippet_segments("x \ue000hit\ue001 y") == (("x ", False), ("hit", True), (" y", False))


async def test_finds_titles_then_messages_by_every_word_as_prefix(database: Database) -> None:
    rollout = await database.conversations.create(title="Kubernetes rollout plan")
    other = await database.conversations.create(title="Lunch")
    await _say(database, rollout.id, "m1", "How do I roll back a deployment?")
    await _say(database, other.id, "m2", "The deployment of the canteen menu failed")
    await _say(database, other.id, "m3", "nothing relevant here")

    hits = await database.search.search("deploy")
    assert {(h.conversation_id, h.message_id) for h in hits} == {
        (rollout.id, "m1"),
        (other.id, "m2"),
    }
    assert len(hits) == 2
    hit = next(h for h in hits if h.message_id == "m2")
    assert hit.conversation_title == "Lunch"
    assert hit.role == "user"
    assert ("deployment", True) in hit.snippet

    # every word must occur
    assert [h.message_id for h in await database.search.search("deployment canteen")] == ["m2"]
    # the title matches first, then the messages
    hits = await database.search.search("kube")
    assert [(h.conversation_id, h.message_id) for h in hits] == [(rollout.id, None)]
    assert ("Kubernetes", True) in hits[0].snippet


async def test_the_index_follows_renames_edits_and_deletes(database: Database) -> None:
    conversation = await database.conversations.create(title="alpha")
    await _say(database, conversation.id, "m1", "zebra crossing")
    await database.conversations.rename(conversation.id, "omega")
    assert await database.search.search("alpha") == []
    assert [h.conversation_id for h in await database.search.search("omega")] == [conversation.id]

    await database.messages.finalize_assistant("m1", parts=_text("giraffe"), status="success")
    assert await database.search.search("zebra") == []
    assert [h.message_id for h in await database.search.search("giraffe")] == ["m1"]

    await database.conversations.delete(conversation.id)
    assert await database.search.search("giraffe") == []
    assert await database.search.search("omega") == []


async def test_only_text_parts_are_indexed(database: Database) -> None:
    conversation = await database.conversations.create()
    parts = [
        {"type": "reasoning", "text": "secretthought"},
        {"type": "text", "text": "visible answer"},
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AAAA"},
    ]
    await database.messages.create_user_message(
        conversation.id, message=NewMessage(id="m1", parts=parts), parent_id=None
    )
    assert await database.search.search("secretthought") == []
    assert [h.message_id for h in await database.search.search("visible")] == ["m1"]


async def test_bad_queries_are_refused(database: Database) -> None:
    with pytest.raises(ValidationError, match="at least one word"):
        await database.search.search(" !? ")
    with pytest.raises(ValidationError, match="at most 200"):
        await database.search.search("x" * 201)
    with pytest.raises(ValidationError, match="limit"):
        await database.search.search("x", limit=0)
    # FTS syntax in the query is only words, never operators
    conversation = await database.conversations.create(title='NEAR AND "OR" NOT')
    assert [h.conversation_id for h in await database.search.search('"near" -and*')] == [
        conversation.id
    ]
