"""``Resources``: the lookups of owned resources other than conversations (agents, agent
sessions, scheduled tasks and their runs), each deciding access where it looks the resource up.

Contract (the same rules as ``OwnerPolicy``; routes never compare owners themselves):

* ``owner_filter(caller)``: None for an admin or with auth off (every owner), else the
  member's id: what a listing is restricted to.
* ``agent(caller, id, action)``: an agent its owner may read and write; shared to read, a member
  may see it and start sessions with it; shared to write, also change it. ``schedule``: the
  owner's (an admin's: any). ``session(caller, id)``: the owner's (an admin's: any);
  ``session(caller, id, action)`` also a session of an agent shared with the caller for that
  action (as ``OwnerPolicy`` shares the session's conversation through its agent).
  ``agent_sessions_owner(caller, agent)``: whose sessions of the agent the caller lists (None:
  every one's, for an admin, the owner and a share). ``run``: a run of the caller's task,
  session or agent. Anything else raises ``NotFoundError``
  (404, never 403): the answer does not say whether the resource exists.
* ``may_run_code(caller, driver_type, tools)``: only an admin creates or changes an agent whose
  driver or tools can run code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from drupe.admission.access import Action
from drupe.admission.principal import Principal
from drupe.errors import NotFoundError

if TYPE_CHECKING:
    from drupe.persistence.db import Database
    from drupe.persistence.records import AgentRecord, AgentSessionRecord
    from drupe.persistence.schedule_records import ScheduleRecord, TaskRunRecord

__all__ = ["CODE_DRIVERS", "CODE_TOOLS", "Resources"]

_ID_MAX: Final = 255
CODE_DRIVERS: Final = frozenset(("claude-code",))
"""Drivers whose agent runs shell commands and edits files on the server."""
CODE_TOOLS: Final = frozenset(("python_exec", "shell", "bash", "run_command"))
"""Tools that run code on the server."""


class Resources:
    def __init__(self, db: Database, *, enabled: bool) -> None:
        self.db = db
        self.enabled = enabled

    def owner_filter(self, caller: Principal) -> str | None:
        return None if not self.enabled or caller.is_admin else caller.user_id

    def owner_of_new(self, caller: Principal) -> str | None:
        """The owner stamped on what ``caller`` creates (None with auth off: the first admin
        adopts it when identity is turned on)."""
        return caller.user_id if self.enabled else None

    def _sees(self, caller: Principal, owner_id: str | None) -> bool:
        return self.owner_filter(caller) is None or owner_id == caller.user_id

    async def agent(self, caller: Principal, agent_id: str, action: Action) -> AgentRecord:
        record = await self.db.agents.get_agent(agent_id) if len(agent_id) <= _ID_MAX else None
        if (
            record is not None
            and not self._sees(caller, record.owner_id)
            and not await self._shared(caller, agent_id, action)
        ):
            record = None
        if record is None:
            raise NotFoundError("agent", agent_id)
        return record

    async def session(
        self, caller: Principal, session_id: str, action: Action | None = None
    ) -> AgentSessionRecord:
        record = (
            await self.db.agents.get_session(session_id) if len(session_id) <= _ID_MAX else None
        )
        if record is not None and not self._sees(caller, record.owner_id):
            shared = action is not None and await self._shared(caller, record.agent_id, action)
            if not shared:
                record = None
        if record is None:
            raise NotFoundError("agent session", session_id)
        return record

    async def agent_sessions_owner(self, caller: Principal, agent: AgentRecord) -> str | None:
        """Whose sessions of ``agent`` (already looked up for ``caller``) the caller lists:
        None (every one's) for an admin, the agent's owner and a member it is shared with."""
        owner = self.owner_filter(caller)
        if owner is None or agent.owner_id == owner:
            return None
        return None if await self._shared(caller, agent.id, "read") else owner

    async def _shared(self, caller: Principal, agent_id: str, action: Action) -> bool:
        access = await self.db.shares.access_of("agent", agent_id, caller.user_id)
        return access == "write" or (access == "read" and action == "read")

    async def schedule(self, caller: Principal, schedule_id: str) -> ScheduleRecord:
        record = await self.db.schedules.get(schedule_id) if len(schedule_id) <= _ID_MAX else None
        if record is None or not self._sees(caller, record.owner_id):
            raise NotFoundError("schedule", schedule_id)
        return record

    async def run(self, caller: Principal, run_id: str) -> TaskRunRecord:
        record = await self.db.schedules.get_run(run_id) if len(run_id) <= _ID_MAX else None
        if record is not None and self.owner_filter(caller) is not None:
            task = await self.db.schedules.get(record.schedule_id) if record.schedule_id else None
            session = (
                await self.db.agents.get_session(record.session_id) if record.session_id else None
            )
            agent = await self.db.agents.get_agent(record.agent_id) if record.agent_id else None
            owners = {r.owner_id for r in (task, session, agent) if r is not None and r.owner_id}
            if caller.user_id not in owners:  # a run of the caller's task, session or agent
                record = None
        if record is None:
            raise NotFoundError("task run", run_id)
        return record

    def may_run_code(self, caller: Principal, driver_type: str, tools: tuple[str, ...]) -> bool:
        if not self.enabled or caller.is_admin:
            return True
        return driver_type not in CODE_DRIVERS and not CODE_TOOLS.intersection(tools)
