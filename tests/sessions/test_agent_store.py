"""``AgentStore`` on SQLite and PostgreSQL: CRUD, session conversations, resume tokens."""

from __future__ import annotations

import pytest

from drupe.errors import ValidationError
from drupe.persistence import Database
from drupe.persistence.records import NewMessage, NewPlaceholder


async def test_agents_and_sessions_crud(database: Database) -> None:
    agent = await database.agents.create_agent(
        name="coder",
        driver_type="fake",
        model_id="scripted:a",
        tools=["read_file"],
        mcp_servers=["git"],
        permission_mode="plan",
    )
    assert agent.tools == ("read_file",) and agent.permission_mode == "plan"
    session = await database.agents.create_session(agent.id, title="s", settings={"k": 1})
    assert session.conversation_id == f"agent-session:{session.id}"
    conversation = await database.conversations.get(session.conversation_id)
    assert conversation is not None and conversation.title == "s"
    changed = await database.agents.update_agent(agent.id, model_id=None)
    assert changed.model_id is None
    assert [s.id for s in await database.agents.list_sessions(agent.id)] == [session.id]
    with pytest.raises(ValidationError):
        await database.agents.update_agent(agent.id, permission_mode="yolo")
    with pytest.raises(ValidationError):
        await database.agents.create_session("nope")
    await database.agents.delete_agent(agent.id)
    assert await database.agents.get_session(session.id) is None
    assert await database.conversations.get(session.conversation_id) is None


async def test_tokens_of_pending_sessions_are_discarded(database: Database) -> None:
    agent = await database.agents.create_agent(name="a", driver_type="fake", model_id="m")
    crashed = await database.agents.create_session(agent.id)
    clean = await database.agents.create_session(agent.id)
    for session in (crashed, clean):
        cid = session.conversation_id
        await database.messages.create_turn(
            cid,
            user_message=NewMessage(id=f"u-{session.id}", parts=[{"type": "text", "text": "x"}]),
            parent_id=None,
            placeholders=[NewPlaceholder(message_id=f"a-{session.id}", model_id="m")],
        )
        await database.agents.record_resume_token(session.id, f"tok-{session.id}")
    await database.messages.finalize_assistant(
        f"a-{clean.id}", parts=[], status="success", runtime_resume_token=f"tok-{clean.id}"
    )
    assert await database.agents.discard_tokens_for_pending() == [crashed.id]
    assert await database.messages.reconcile_pending() == 1
    assert await database.agents.latest_resume_token(crashed.id) is None
    assert await database.agents.latest_resume_token(clean.id) == f"tok-{clean.id}"
    row = await database.messages.get(f"a-{clean.id}")
    assert row is not None and row.runtime_resume_token == f"tok-{clean.id}"
