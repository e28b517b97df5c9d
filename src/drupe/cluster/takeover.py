"""``Takeover``: this node's sweep that settles the turns of owners the cluster lost.

Contract (``docs/lifecycles/cluster.md``):

* The takeover sweep (one task, every ``sweep_interval``): every live turn (``<prefix>:live``)
  and every conversation with ``pending`` rows whose lease is gone (its owner died or stalled
  past the TTL; see ``sweep`` for when an owner that may be alive is given a TTL to recover) is
  taken over: this node acquires the lease (a new, higher fencing token), rebuilds each row
  from the turn's chunk log where the log holds more than the row's last checkpoint (the log is
  what the subscribers saw), finalizes the rows (``MessageStore.take_over``: the partial text is
  kept, interrupted parts are closed, one ``data-error`` part says the node was lost), writes
  the turn's terminal to the chunk log so every subscriber on every node ends, and releases the
  lease. The old owner, if it ever wakes, is fenced out of both (``LeaseOwnership``).
* With ``on_owner_loss = "retry"`` the lost user message is answered again here (at most
  ``MAX_OWNER_LOSS_RETRIES`` times; the decisions are the pure ``owner_loss`` module) and the
  log's followers move on to the new attempt.
* The same sweep fails the ``running`` task runs of a node whose heartbeat has been gone for a
  whole TTL (``GoneNodes``; a booting node fails its own earlier runs itself).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
import orjson
from redis.exceptions import RedisError

from drupe.admission.base import Regenerate
from drupe.admission.dispatch import Dispatcher
from drupe.chunks.accumulate import AccumulateError, Accumulator
from drupe.cluster.gone_nodes import GoneNodes
from drupe.cluster.lease import Fence
from drupe.cluster.log_encoding import LogEntry
from drupe.cluster.log_writer import anchors_key, hdel_if_turn, live_key
from drupe.cluster.owner_loss import (
    Ending,
    RetryPlan,
    log_endings,
    lost_parent,
    retry_plan,
    row_anchors,
)
from drupe.cluster.ownership import LeaseOwnership
from drupe.errors import DrupeError, NotOwnerError, OwnerUnavailableError
from drupe.lifetimes import TaskOwner
from drupe.streaming.manager import StreamManager

if TYPE_CHECKING:
    from drupe.cluster.node import ClusterNode
    from drupe.persistence.messages import MessageStore
    from drupe.persistence.schedules import ScheduleStore

__all__ = [
    "MAX_OWNER_LOSS_RETRIES",
    "NODE_LOST",
    "NODE_LOST_RETRIED",
    "Takeover",
    "retry_notice",
]

log = logging.getLogger(__name__)

NODE_LOST: Final = "the node that was answering was lost; the partial answer was kept"
NODE_LOST_RETRIED: Final = (
    "the node that was answering was lost; the partial answer was kept and the message is "
    "being answered again"
)
MAX_OWNER_LOSS_RETRIES: Final = 2
"""Times one user message is answered again after its owner was lost."""
_RETRY_COUNTER_TTL: Final = 24 * 3600


class Takeover(TaskOwner):
    """The takeover sweep of one node; enter it to start the sweep."""

    def __init__(
        self,
        node: ClusterNode,
        ownership: LeaseOwnership,
        *,
        dispatcher: Dispatcher,
        manager: StreamManager,
        messages: MessageStore,
        sweep_interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        settle: Callable[[str, str, str], None] | None = None,
        schedules: ScheduleStore | None = None,
    ) -> None:
        self.node = node
        self.ownership = ownership
        self.dispatcher = dispatcher
        self.manager = manager
        self.messages = messages
        ttl = node.settings.lease_ttl
        self.sweep_interval = sweep_interval or min(1.0, ttl / 4)
        self.takeovers = 0
        self.retried = 0
        """Lost answers this node answered again (``on_owner_loss = "retry"``)."""
        self.on_owner_loss = node.settings.on_owner_loss
        self.clock = clock
        self.settle = settle
        """``settle(conversation, turn, status)``: show a takeover's terminal cluster-wide."""
        self.schedules = schedules
        """Task runs: the runs of a node gone for a whole TTL are failed by the sweep."""
        self._gone = GoneNodes(ttl)
        self.runs_failed = 0
        self._orphans: dict[str, float] = {}
        """Orphans whose owner may still be alive, and when they were first seen."""

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        group.start_soon(self._sweep_loop)

    async def _sweep_loop(self) -> None:
        while True:
            await anyio.sleep(self.sweep_interval)
            try:
                await self.sweep()
                await self.sweep_runs()
            except (OSError, RedisError) as err:
                log.warning("takeover sweep skipped: %s", err)
            except Exception:  # isolation boundary: the sweep runs again next period
                log.exception("takeover sweep failed")

    async def sweep(self) -> int:
        """Take over every orphaned conversation once; returns how many were taken over.

        An orphan is a live turn (``<prefix>:live``) or a conversation with ``pending`` rows
        whose lease is gone. It is taken over at once when its owner node's heartbeat
        (``<prefix>:node:<id>``) is gone too (the node died or stalled past the TTL); otherwise
        (the owner is alive, or unknown: Redis lost its data) only once it stayed orphaned for
        a whole TTL, which gives a live owner the time to take its vanished lease again.
        """
        redis = self.node.redis
        prefix = self.node.prefix
        live: Any = await redis.hgetall(live_key(prefix))
        candidates: dict[str, tuple[str | None, str | None, str | None]] = {}
        for raw_conversation, raw_info in (live or {}).items():
            info = orjson.loads(raw_info)
            candidates[_text(raw_conversation)] = (
                str(info.get("key") or "") or None,
                str(info.get("node") or "") or None,
                str(info.get("turn") or "") or None,
            )
        for conversation_id in await self.messages.pending_conversations():
            candidates.setdefault(conversation_id, (None, None, None))
        now = self.clock()
        seen = self._orphans
        self._orphans = {}
        taken = 0
        others = [
            conversation_id
            for conversation_id in candidates
            if not (self.ownership.owns(conversation_id) or self.manager.get(conversation_id))
        ]
        # One MGET for every lease (a node sees every other node's live turns each sweep); a
        # lease taken after it is read is found by ``take_over``, which acquires it.
        holders = await self.node.lease.holders(others)
        for conversation_id, holder in zip(others, holders, strict=True):
            if holder is not None:
                continue
            key, owner, turn_id = candidates[conversation_id]
            owner_alive = owner is None or bool(await redis.exists(f"{prefix}:node:{owner}"))
            since = seen.get(conversation_id, now)
            if owner_alive and now - since < self.node.settings.lease_ttl:
                self._orphans[conversation_id] = since  # wait: its owner may take it again
                continue
            if await self.take_over(conversation_id, key, turn_id):
                taken += 1
        return taken

    async def sweep_runs(self) -> int:
        """Fail the ``running`` task runs of nodes gone for a whole TTL (``GoneNodes``)."""
        if self.schedules is None:
            return 0
        prefix = self.node.prefix
        nodes = await self.schedules.running_nodes()
        others = sorted(n for n in nodes if n is not None and n != self.node.node_id)
        alive = {n: bool(await self.node.redis.exists(f"{prefix}:node:{n}")) for n in others}
        gone = self._gone.observe(alive, self.clock())
        if not gone:
            return 0
        live = [n for n in others if n not in gone] + [self.node.node_id]
        failed = await self.schedules.fail_running_of_gone_nodes(
            datetime.now(UTC), "the node running it was lost", live
        )
        self.runs_failed += failed
        if failed:
            log.warning("failed %d task run(s) of gone node(s) %s", failed, sorted(gone))
        return failed

    async def take_over(
        self, conversation_id: str, log_key: str | None, turn_id: str | None = None
    ) -> bool:
        """Take over one orphaned conversation (see the module docstring); False when another
        node holds its lease (it took over first, or admitted a new turn)."""
        if self.on_owner_loss == "retry":
            try:
                async with self.ownership.hold(conversation_id):
                    fence = self.ownership.fence(conversation_id)
                    assert fence is not None
                    await self._settle_lost(conversation_id, log_key, turn_id, fence, retry=True)
                    return True
            except (NotOwnerError, OwnerUnavailableError):
                return False
        lease = self.node.lease
        fence = await lease.acquire(conversation_id, self.node.node_id)
        if fence is None:
            return False  # another node is taking over (or a new owner admitted a turn)
        try:
            await self._settle_lost(conversation_id, log_key, turn_id, fence, retry=False)
            return True
        finally:
            await lease.release(fence)

    async def _settle_lost(
        self,
        conversation_id: str,
        log_key: str | None,
        turn_id: str | None,
        fence: Fence,
        *,
        retry: bool,
    ) -> None:
        """Finalize a lost owner's rows and log under ``fence``; with ``retry``, answer the
        user message again and point the log's followers at the new attempt (the decisions:
        ``owner_loss.py``)."""
        again = await self._retry_plan(conversation_id) if retry else None
        entries: list[LogEntry] = []
        anchors: dict[str, str] = {}
        if log_key is not None:  # read once: the old owner can no longer write to it
            entries = await self.node.log.read(log_key)
            raw: Any = await self.node.redis.hgetall(anchors_key(log_key))
            anchors = row_anchors({_text(k): _text(v) for k, v in (raw or {}).items()})
        rebuilt = await self._rebuild_rows(entries, anchors)
        rows = await self.messages.take_over(
            conversation_id,
            fence=fence.token,
            reason=NODE_LOST_RETRIED if again is not None else NODE_LOST,
            rebuilt=rebuilt,
        )
        if turn_id is not None and self.settle is not None:
            self.settle(conversation_id, turn_id, "error")
        retried: dict[str, tuple[str, str]] = {}
        if again is not None:
            retried = await self._retry(conversation_id, again)
        guard = (self.node.lease.lease_key(conversation_id), fence.value)
        if log_key is not None:
            await self._end_log(log_key, guard, log_endings(entries, anchors, retried))
            live = live_key(self.node.prefix)
            await hdel_if_turn(self.node.redis, live, conversation_id, log_key)
        self.takeovers += 1
        self.retried += len(retried)
        log.warning(
            "took over conversation %r (token %d): %d row(s) finalized, %d rebuilt from the "
            "chunk log %s, %d answered again",
            conversation_id,
            fence.token,
            len(rows),
            len(rebuilt),
            log_key,
            len(retried),
        )

    async def _retry_plan(self, conversation_id: str) -> RetryPlan | None:
        """``owner_loss.retry_plan`` over the conversation's rows; the attempt is counted here,
        before the rows are ended, so a row says it is answered again only when it is."""
        rows = await self.messages.list_for_conversation(conversation_id)
        parent_id = lost_parent(rows)
        if parent_id is None:
            return None
        counter = f"{self.node.prefix}:retries:{conversation_id}:{parent_id}"
        attempts = int(await self.node.redis.incr(counter))
        await self.node.redis.expire(counter, _RETRY_COUNTER_TTL)
        plan = retry_plan(rows, attempts, MAX_OWNER_LOSS_RETRIES)
        if plan is None:
            log.warning(
                "not answering %r of %r again: its answer was lost %d times already",
                parent_id,
                conversation_id,
                attempts - 1,
            )
        return plan

    async def _retry(self, conversation_id: str, plan: RetryPlan) -> dict[str, tuple[str, str]]:
        """Admit the planned new attempt; returns lost row id -> ``(turn, execution)`` of its
        new answer (empty when it could not be admitted: the rows stay ended)."""
        request = Regenerate(
            conversation_id=conversation_id,
            user_message_id=plan.user_message_id,
            model_ids=plan.model_ids,
        )
        try:
            result = await self.dispatcher.dispatch(request)
        except DrupeError as err:
            log.warning(
                "could not answer %r again after its owner was lost: %s",
                plan.user_message_id,
                err,
            )
            return {}
        if result.mode != "started" or result.turn_id is None:
            return {}
        turn_id = result.turn_id
        return {
            row_id: (turn_id, execution_id)
            for row_id, execution_id in zip(plan.row_ids, result.execution_ids, strict=False)
        }

    async def _rebuild_rows(
        self, entries: list[LogEntry], anchors: dict[str, str]
    ) -> dict[str, list[dict[str, Any]]]:
        """The answer the chunk log holds for each of the turn's rows, where that is more than
        the row's last checkpoint (the log is what every subscriber saw; checkpoints are up to a
        second behind): row id -> parts, for ``take_over`` to close and keep."""
        if not anchors:
            return {}
        folded: dict[str, Accumulator] = {}
        for entry in entries:
            if entry.terminal is not None or entry.execution_id not in anchors:
                continue
            accumulator = folded.setdefault(entry.execution_id, Accumulator())
            for chunk in entry.chunks:
                with contextlib.suppress(AccumulateError):
                    accumulator.push(chunk)
        rebuilt: dict[str, list[dict[str, Any]]] = {}
        for execution_id, accumulator in folded.items():
            row = await self.messages.get(anchors[execution_id])
            if row is None or row.status != "pending":
                continue
            parts: list[dict[str, Any]] = orjson.loads(accumulator.parts_json())
            if _answer_size(parts) > _answer_size(row.parts):
                rebuilt[row.id] = parts
        return rebuilt

    async def _end_log(self, key: str, guard: tuple[str, str], endings: list[Ending]) -> None:
        """Write the ``owner_loss.log_endings``: a retried execution gets its ``data-retry``
        chunk and a terminal naming its new attempt (its followers move on to it); every other
        one, and the turn itself, the node-lost error."""
        error = {"name": "NodeLost", "message": NODE_LOST}
        for ending in endings:
            if ending.retried_as is None:
                await self.node.log.end(
                    key, ending.execution_id, "error", done=True, error=error, fence=guard
                )
                continue
            chunk = retry_notice(NODE_LOST_RETRIED)
            await self.node.log.append(
                key, ending.execution_id, [chunk], [ending.retry_seq], fence=guard
            )
            await self.node.log.end(
                key,
                ending.execution_id,
                "error",
                done=False,
                error={"name": "NodeLost", "message": NODE_LOST_RETRIED},
                retried_as=ending.retried_as,
                fence=guard,
            )


def retry_notice(message: str) -> dict[str, Any]:
    """The transient ``data-retry`` chunk of an answer that starts again on another node (the
    shape of the agent loop's own retries, ``drupe.agent.retry.retry_chunk``)."""
    return {
        "type": "data-retry",
        "data": {
            "attempt": 2,
            "maxAttempts": MAX_OWNER_LOSS_RETRIES + 1,
            "delayMs": 0,
            "statusCode": None,
            "message": message,
            "reason": "node-lost",
        },
        "transient": True,
    }


def _answer_size(parts: Any) -> tuple[int, int]:
    """How much of an answer parts hold: characters of text and reasoning, then parts."""
    if not isinstance(parts, list):
        return (0, 0)
    chars = sum(len(part.get("text", "")) for part in parts if isinstance(part, dict))
    return (chars, len(parts))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
