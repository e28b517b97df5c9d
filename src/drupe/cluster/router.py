"""``ClusterRouter``: a conversation's commands run on its owner node; subscribers on every
node follow the chunk log.

Contract (``docs/lifecycles/cluster.md``):

* ``dispatch(request)``: the conversation's owner admits it. With no owner (or this node), the
  local dispatcher runs it (taking this node's lease first; ``dispatch_here`` announces the turn
  in the chunk log before returning); with another owner the request is routed to it
  (``CommandBus``) and its ``DispatchResult`` comes back. An owner that is gone (its node died)
  is waited for until a node took over (at most ``lease_ttl + 2`` s), then the request runs
  here; one that does not answer is a 503 with ``Retry-After``.
* ``stop``, ``approvals`` and ``delete`` follow the same rule (a stop with no owner anywhere
  stops nothing); on the owner they run the local port's ``*_here`` methods.
* A routed command's payload is the request's own dataclass, dumped and validated by pydantic
  (never built by hand), with its caller (a ``Principal``): the owner node asks its own access
  policy again before it runs the command.
* ``follower(conversation, listener)``: subscribers on every node read the chunk log
  (``LogFollower``); ``latest_turn`` finds what a resume should follow.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
from pydantic import TypeAdapter
from redis.exceptions import RedisError

from drupe.admission.approval_service import ApprovalOutcome
from drupe.admission.base import Regenerate, Submit
from drupe.admission.dispatch import Dispatcher, DispatchResult
from drupe.admission.local_conversations import LocalConversations
from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.cluster.command_bus import CommandBus, NodeGone
from drupe.cluster.follower import FollowingListener, LogFollower
from drupe.cluster.log_writer import turns_key
from drupe.errors import NotOwnerError, OwnerUnavailableError, ValidationError
from drupe.lifetimes import TaskOwner
from drupe.streaming.approval_rules import Decision
from drupe.streaming.listeners.base import Listener
from drupe.streaming.listeners.sse import MultiplexListener

if TYPE_CHECKING:
    from drupe.cluster.node import ClusterNode

__all__ = ["ClusterRouter"]

T = TypeVar("T")
_SUBMIT: TypeAdapter[Submit] = TypeAdapter(Submit)
_REGENERATE: TypeAdapter[Regenerate] = TypeAdapter(Regenerate)
_RESULT: TypeAdapter[DispatchResult] = TypeAdapter(DispatchResult)
_DECISIONS: TypeAdapter[list[Decision]] = TypeAdapter(list[Decision])
_OUTCOME: TypeAdapter[ApprovalOutcome] = TypeAdapter(ApprovalOutcome)
_PRINCIPAL: TypeAdapter[Principal] = TypeAdapter(Principal)


class ClusterRouter(TaskOwner):
    """Routes a conversation's commands to its owner; enter it to serve routed commands."""

    def __init__(
        self,
        node: ClusterNode,
        *,
        dispatcher: Dispatcher,
        local: LocalConversations,
        announce: Callable[[str, str], Awaitable[None]] | None = None,
    ) -> None:
        self.node = node
        self.dispatcher = dispatcher
        self.local = local
        self.announce = announce
        """Write a just admitted turn's announcement to the log (``LogWriter.announce``)."""
        ttl = node.settings.lease_ttl
        self.wait_for_takeover = ttl + 2.0
        self.bus = CommandBus(
            node.redis,
            prefix=node.prefix,
            node_id=node.node_id,
            handlers={
                "dispatch": self._on_dispatch,
                "stop": self._on_stop,
                "approvals": self._on_approvals,
                "delete": self._on_delete,
            },
            timeout=ttl + 2.0,
        )

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        await self.bus.__aenter__()

    async def _before_cancel(self) -> None:
        await self.bus.__aexit__(None, None, None)

    # --- commands ------------------------------------------------------------------------------

    async def dispatch(
        self, request: Submit | Regenerate, caller: Principal = LOCAL_ADMIN
    ) -> DispatchResult:
        return await self._routed(
            request.conversation_id,
            caller,
            lambda: self.dispatch_here(request),
            "dispatch",
            {"request": _request_json(request)},
            lambda data: _RESULT.validate_python(data),
        )

    async def dispatch_here(
        self, request: Submit | Regenerate, subscribers: Sequence[Listener] = ()
    ) -> DispatchResult:
        """Admit on this node (taking its lease) and announce the turn before returning."""
        result = await self.dispatcher.dispatch(request, subscribers)
        if result.mode == "started" and result.turn_id is not None and self.announce is not None:
            await self.announce(request.conversation_id, result.turn_id)
        return result

    async def stop(
        self, conversation_id: str, *, reason: str = "user-stop", caller: Principal = LOCAL_ADMIN
    ) -> bool:
        return await self._routed(
            conversation_id,
            caller,
            lambda: self.local.stop_here(conversation_id, reason=reason),
            "stop",
            {"conversation": conversation_id, "reason": reason},
            lambda data: bool(data["stopped"]),
        )

    async def approvals(
        self, conversation_id: str, decisions: list[Decision], caller: Principal = LOCAL_ADMIN
    ) -> ApprovalOutcome:
        return await self._routed(
            conversation_id,
            caller,
            lambda: self.local.approve_here(conversation_id, decisions),
            "approvals",
            {"conversation": conversation_id, "decisions": [asdict(d) for d in decisions]},
            lambda data: _OUTCOME.validate_python(data),
        )

    async def delete(self, conversation_id: str, caller: Principal = LOCAL_ADMIN) -> None:
        """The owner stops the live answer (its partial persisted) and deletes the rows."""
        await self._routed(
            conversation_id,
            caller,
            lambda: self.local.delete_here(conversation_id),
            "delete",
            {"conversation": conversation_id},
            lambda data: None,
        )

    async def _routed(
        self,
        conversation_id: str,
        caller: Principal,
        local: Callable[[], Awaitable[T]],
        kind: str,
        payload: dict[str, Any],
        decode: Callable[[dict[str, Any]], T],
    ) -> T:
        payload = {**payload, "caller": _caller_json(caller)}
        deadline = time.monotonic() + self.wait_for_takeover
        while True:
            try:
                holder = await self.node.lease.holder(conversation_id)
            except (OSError, RedisError) as err:
                raise OwnerUnavailableError(
                    f"cannot reach Redis to find the owner: {err}", retry_after=1.0
                ) from err
            try:
                if holder is None or holder.node_id == self.node.node_id:
                    return await local()
                return decode(await self.bus.call(holder.node_id, kind, payload))
            except (NotOwnerError, NodeGone) as err:
                # The owner changed under us, or died: wait for a takeover (or the TTL).
                if time.monotonic() > deadline:
                    raise OwnerUnavailableError(
                        f"the node that owns conversation {conversation_id!r} is gone and no "
                        "node has taken over yet",
                        retry_after=self.node.settings.lease_ttl,
                    ) from err
                await anyio.sleep(0.2)

    async def _on_dispatch(self, payload: dict[str, Any]) -> dict[str, Any]:
        # A node that no longer owns it raises NotOwnerError (the ownership port): the caller
        # re-resolves the owner.
        request = _request_from_json(payload["request"])
        await self._check(payload, request.conversation_id)
        result = await self.dispatch_here(request)
        return asdict(result)

    async def _on_stop(self, payload: dict[str, Any]) -> dict[str, Any]:
        reason = str(payload.get("reason") or "user-stop")
        await self._check(payload, str(payload["conversation"]))
        stopped = await self.local.stop_here(str(payload["conversation"]), reason=reason)
        return {"stopped": stopped}

    async def _on_approvals(self, payload: dict[str, Any]) -> dict[str, Any]:
        decisions = _DECISIONS.validate_python(payload["decisions"])
        await self._check(payload, str(payload["conversation"]))
        outcome = await self.local.approve_here(str(payload["conversation"]), decisions)
        return asdict(outcome)

    async def _on_delete(self, payload: dict[str, Any]) -> dict[str, Any]:
        await self._check(payload, str(payload["conversation"]))
        await self.local.delete_here(str(payload["conversation"]))
        return {"deleted": True}

    async def _check(self, payload: dict[str, Any], conversation_id: str) -> None:
        """The owner asks its own access policy again for the routed command's caller."""
        caller = _PRINCIPAL.validate_python(payload.get("caller") or _caller_json(LOCAL_ADMIN))
        await self.local.access.check(caller, conversation_id, "write")

    # --- subscriptions -------------------------------------------------------------------------

    def follower(
        self, conversation_id: str, listener: FollowingListener | MultiplexListener
    ) -> LogFollower:
        return LogFollower(self.node, conversation_id, listener, self.task_group)

    async def latest_turn(self, conversation_id: str) -> tuple[str, int] | None:
        """The newest turn of the conversation and when it was announced (ms), if any."""
        rows: Any = await self.node.redis.xrevrange(
            turns_key(self.node.prefix, conversation_id), count=1
        )
        if not rows:
            return None
        entry_id, fields = rows[0]
        text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        turn = fields.get(b"e", fields.get("e"))
        turn = turn.decode() if isinstance(turn, bytes) else str(turn)
        return turn, int(text.split("-")[0])


def _caller_json(caller: Principal) -> dict[str, Any]:
    scopes = sorted(caller.scopes) if caller.scopes is not None else None
    return {**asdict(caller), "scopes": scopes}


def _request_json(request: Submit | Regenerate) -> dict[str, Any]:
    kind = "submit" if isinstance(request, Submit) else "regenerate"
    return {"kind": kind, **asdict(request)}


def _request_from_json(data: dict[str, Any]) -> Submit | Regenerate:
    fields = {key: value for key, value in data.items() if key != "kind"}
    match data.get("kind"):
        case "submit":
            return _SUBMIT.validate_python(fields)
        case "regenerate":
            return _REGENERATE.validate_python(fields)
    raise ValidationError(f"unknown routed request kind {data.get('kind')!r}")
