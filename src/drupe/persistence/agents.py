"""``AgentStore``: agents and agent sessions, and the session-side resume-token writes.

The only code that issues SQL against ``agents`` and ``agent_sessions``. A session's messages
reuse the ``messages`` table: creating a session also creates the conversation
``agent-session:<sessionId>`` in the same transaction, and deleting a session (or its agent)
deletes that conversation and its messages.

Resume tokens are opaque strings. ``finalize`` writes of session rows go through
``MessageStore.finalize_assistant(runtime_resume_token=...)``; this store keeps the session's
newest token (``record_resume_token``), reads it for a cold connect (``latest_resume_token``), and
at boot discards the tokens of every session that a crash left with a ``pending`` row
(``discard_tokens_for_pending``; run it BEFORE ``MessageStore.reconcile_pending``).

Every call is one transaction. Unknown ids raise ``ValidationError``; bad input writes nothing.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sqlalchemy import delete, or_, select, update

from drupe.errors import ValidationError
from drupe.ids import SESSION_PREFIX, session_conversation_id
from drupe.observability.turn_spans import trace_id_for
from drupe.persistence.clock import utc_now
from drupe.persistence.records import AgentRecord, AgentSessionRecord
from drupe.persistence.tables import (
    AgentRow,
    AgentSessionRow,
    ConversationRow,
    MessageRow,
    ShareRow,
)
from drupe.persistence.transaction import Transactions

__all__ = ["AGENT_SESSION_PREFIX", "PERMISSION_MODES", "AgentStore", "session_conversation_id"]

AGENT_SESSION_PREFIX: Final = SESSION_PREFIX
PERMISSION_MODES: Final = ("default", "accept-edits", "plan", "bypass")
_AGENT_FIELDS: Final = frozenset(
    ("name", "driver_type", "model_id", "instructions", "workspace")
) | frozenset(("tools", "mcp_servers", "permission_mode"))


def _agent(row: AgentRow) -> AgentRecord:
    return AgentRecord(
        id=row.id,
        name=row.name,
        driver_type=row.driver_type,
        model_id=row.model_id,
        instructions=row.instructions,
        workspace=row.workspace,
        tools=tuple(row.tools or ()),
        mcp_servers=tuple(row.mcp_servers or ()),
        permission_mode=row.permission_mode,
        created_at=row.created_at,
        updated_at=row.updated_at,
        owner_id=row.owner_id,
    )


def _session(row: AgentSessionRow) -> AgentSessionRecord:
    return AgentSessionRecord(
        id=row.id,
        agent_id=row.agent_id,
        title=row.title,
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_resume_token=row.last_resume_token,
        settings=dict(row.settings or {}),
        trace_id=row.trace_id,
        owner_id=row.owner_id,
    )


def _check_agent_values(values: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(values) - _AGENT_FIELDS
    if unknown:
        raise ValidationError(f"unknown agent field(s): {sorted(unknown)!r}")
    clean = dict(values)
    if "name" in clean and (not isinstance(clean["name"], str) or not clean["name"].strip()):
        raise ValidationError("an agent needs a non-empty name")
    if "driver_type" in clean and not clean["driver_type"]:
        raise ValidationError("an agent needs a driver type")
    if "permission_mode" in clean and clean["permission_mode"] not in PERMISSION_MODES:
        raise ValidationError(f"permission_mode must be one of {PERMISSION_MODES!r}")
    for key in ("tools", "mcp_servers"):
        if key in clean:
            items = clean[key]
            if isinstance(items, str) or not all(isinstance(i, str) for i in items):
                raise ValidationError(f"{key} must be a list of strings")
            clean[key] = list(items)
    return clean


class AgentStore:
    """Agents and agent sessions in one database. Safe to share between tasks."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    # -- agents ----------------------------------------------------------------------------

    async def create_agent(
        self,
        *,
        name: str,
        driver_type: str,
        model_id: str | None,
        instructions: str | None = None,
        workspace: str | None = None,
        tools: Sequence[str] = (),
        mcp_servers: Sequence[str] = (),
        permission_mode: str = "default",
        agent_id: str | None = None,
        owner_id: str | None = None,
    ) -> AgentRecord:
        values = _check_agent_values(
            {
                "name": name,
                "driver_type": driver_type,
                "model_id": model_id,
                "instructions": instructions,
                "workspace": workspace,
                "tools": tools,
                "mcp_servers": mcp_servers,
                "permission_mode": permission_mode,
            }
        )
        now = utc_now()
        row = AgentRow(
            id=agent_id or f"agent_{uuid.uuid4().hex}",
            created_at=now,
            updated_at=now,
            owner_id=owner_id,
        )
        for key, value in values.items():
            setattr(row, key, value)
        async with self._transactions.write() as db:
            if await db.get(AgentRow, row.id) is not None:
                raise ValidationError(f"agent {row.id!r} already exists")
            db.add(row)
        return _agent(row)

    async def get_agent(self, agent_id: str) -> AgentRecord | None:
        async with self._transactions.read() as db:
            row = await db.get(AgentRow, agent_id)
            return None if row is None else _agent(row)

    async def list_agents(self, *, visible_to: str | None = None) -> builtins.list[AgentRecord]:
        """Every agent (with ``visible_to``: that user's own and those shared with them)."""
        query = select(AgentRow).order_by(AgentRow.created_at)
        if visible_to is not None:
            shared = select(ShareRow.resource_id).where(
                ShareRow.resource_kind == "agent", ShareRow.user_id == visible_to
            )
            query = query.where(or_(AgentRow.owner_id == visible_to, AgentRow.id.in_(shared)))
        async with self._transactions.read() as db:
            rows = (await db.scalars(query)).all()
            return [_agent(row) for row in rows]

    async def update_agent(self, agent_id: str, **changes: Any) -> AgentRecord:
        """Change some fields (``model_id=None`` removes the model); returns the new record."""
        values = _check_agent_values(changes)
        async with self._transactions.write() as db:
            row = await db.scalar(
                update(AgentRow)
                .where(AgentRow.id == agent_id)
                .values(**values, updated_at=utc_now())
                .returning(AgentRow)
            )
            if row is None:
                raise ValidationError(f"unknown agent {agent_id!r}")
            return _agent(row)

    async def delete_agent(self, agent_id: str) -> None:
        """Delete the agent, its sessions, and their conversations."""
        async with self._transactions.write() as db:
            ids = (
                await db.scalars(
                    select(AgentSessionRow.id).where(AgentSessionRow.agent_id == agent_id)
                )
            ).all()
            conversations = [session_conversation_id(i) for i in ids]
            if conversations:
                await db.execute(
                    delete(ConversationRow).where(ConversationRow.id.in_(conversations))
                )
            gone = await db.scalar(
                delete(AgentRow).where(AgentRow.id == agent_id).returning(AgentRow.id)
            )
            if gone is None:
                raise ValidationError(f"unknown agent {agent_id!r}")

    # -- sessions --------------------------------------------------------------------------

    async def create_session(
        self,
        agent_id: str,
        *,
        title: str | None = None,
        settings: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        owner_id: str | None = None,
    ) -> AgentSessionRecord:
        """Create a session and its conversation ``agent-session:<id>`` in one transaction."""
        now = utc_now()
        new_id = session_id or f"sess_{uuid.uuid4().hex}"
        trace_id = trace_id_for(session_conversation_id(new_id))
        row = AgentSessionRow(
            id=new_id,
            agent_id=agent_id,
            title=title,
            created_at=now,
            updated_at=now,
            last_resume_token=None,
            settings=dict(settings or {}),
            trace_id=trace_id,
            owner_id=owner_id,
        )
        async with self._transactions.write() as db:
            if await db.get(AgentRow, agent_id) is None:
                raise ValidationError(f"unknown agent {agent_id!r}")
            if await db.get(AgentSessionRow, row.id) is not None:
                raise ValidationError(f"agent session {row.id!r} already exists")
            db.add(row)
            db.add(
                ConversationRow(
                    id=session_conversation_id(row.id),
                    title=title,
                    created_at=now,
                    updated_at=now,
                    trace_id=trace_id,
                    siblings_group_seq=0,
                    meta={"agentId": agent_id, "sessionId": row.id},
                    owner_id=owner_id,
                )
            )
        return _session(row)

    async def get_session(self, session_id: str) -> AgentSessionRecord | None:
        async with self._transactions.read() as db:
            row = await db.get(AgentSessionRow, session_id)
            return None if row is None else _session(row)

    async def list_sessions(
        self, agent_id: str | None = None, *, owner_id: str | None = None
    ) -> builtins.list[AgentSessionRecord]:
        """Every session (of one agent; of one owner)."""
        query = select(AgentSessionRow).order_by(AgentSessionRow.created_at)
        if agent_id is not None:
            query = query.where(AgentSessionRow.agent_id == agent_id)
        if owner_id is not None:
            query = query.where(AgentSessionRow.owner_id == owner_id)
        async with self._transactions.read() as db:
            return [_session(row) for row in (await db.scalars(query)).all()]

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> AgentSessionRecord:
        values: dict[str, Any] = {"updated_at": utc_now()}
        if title is not None:
            values["title"] = title
        if settings is not None:
            values["settings"] = dict(settings)
        return await self._update_session(session_id, values)

    async def delete_session(self, session_id: str) -> None:
        """Delete the session and its conversation (with every message in it)."""
        async with self._transactions.write() as db:
            gone = await db.scalar(
                delete(AgentSessionRow)
                .where(AgentSessionRow.id == session_id)
                .returning(AgentSessionRow.id)
            )
            if gone is None:
                raise ValidationError(f"unknown agent session {session_id!r}")
            await db.execute(
                delete(ConversationRow).where(
                    ConversationRow.id == session_conversation_id(session_id)
                )
            )

    # -- resume tokens ---------------------------------------------------------------------

    async def record_resume_token(self, session_id: str, token: str) -> None:
        """Remember ``token`` as the session's newest one (written with its terminal row)."""
        await self._update_session(session_id, {"last_resume_token": token})

    async def latest_resume_token(self, session_id: str) -> str | None:
        """The newest persisted token of the session (what a cold connect resumes from)."""
        async with self._transactions.read() as db:
            return await db.scalar(
                select(AgentSessionRow.last_resume_token).where(AgentSessionRow.id == session_id)
            )

    async def discard_tokens_for_pending(self) -> list[str]:
        """Boot: forget the resume tokens of every session with a ``pending`` assistant row.

        Run it before ``MessageStore.reconcile_pending`` (which turns those rows into
        ``error``). Clears the session's token and the tokens stored on its rows, so no later
        connect resumes a runtime state the crash left half-written. Returns the session ids.
        """
        async with self._transactions.write() as db:
            conversations = (
                await db.scalars(
                    select(MessageRow.conversation_id)
                    .where(
                        MessageRow.status == "pending",
                        MessageRow.role == "assistant",
                        MessageRow.conversation_id.startswith(AGENT_SESSION_PREFIX),
                    )
                    .distinct()
                )
            ).all()
            if not conversations:
                return []
            ids = [c.removeprefix(AGENT_SESSION_PREFIX) for c in conversations]
            await db.execute(
                update(AgentSessionRow)
                .where(AgentSessionRow.id.in_(ids))
                .values(last_resume_token=None)
            )
            await db.execute(
                update(MessageRow)
                .where(
                    MessageRow.conversation_id.in_(conversations),
                    MessageRow.runtime_resume_token.is_not(None),
                )
                .values(runtime_resume_token=None)
            )
            return sorted(ids)

    async def _update_session(
        self, session_id: str, values: Mapping[str, Any]
    ) -> AgentSessionRecord:
        async with self._transactions.write() as db:
            row = await db.scalar(
                update(AgentSessionRow)
                .where(AgentSessionRow.id == session_id)
                .values(**values)
                .returning(AgentSessionRow)
            )
            if row is None:
                raise ValidationError(f"unknown agent session {session_id!r}")
            return _session(row)
