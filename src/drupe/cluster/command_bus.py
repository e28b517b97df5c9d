"""``CommandBus``: a command for a conversation reaches its owner node; the answer comes back.

Contract (``docs/lifecycles/cluster.md``, "Routed commands"):

* Every node subscribes (one pub/sub connection) to its own channel ``<prefix>:cmd:<node>``.
  ``call(node, kind, payload)`` publishes ``{id, kind, payload, reply}`` there and waits on the
  reply list ``<prefix>:reply:<id>`` (``BLPOP``), at most ``timeout`` seconds.
* ``PUBLISH`` reaching no subscriber means the node is gone (its connection closed when it
  died): ``NodeGone`` at once, so the caller waits for the takeover instead of a timeout. A
  node that receives but does not answer in time (paused, overloaded) is
  ``OwnerUnavailableError`` with a ``Retry-After``.
* The owner runs each command in its own task (commands never wait for each other) with the
  handler registered for its kind; the reply is ``{"result": ...}`` or ``{"error": {type,
  reason, message}}`` for a ``DrupeError``, rebuilt on the caller as the same error class
  (``AdmissionError`` keeps its reason, ``NotOwnerError`` its node). The reply list expires
  after a minute, so an abandoned reply never stays in Redis.
* The subscription survives Redis restarts: the listen loop reconnects with a capped backoff.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
import orjson
from redis.exceptions import RedisError

from drupe.errors import (
    AdmissionError,
    ConfigError,
    DrupeError,
    NotFoundError,
    NotOwnerError,
    OwnerUnavailableError,
    PersistenceError,
    UnknownConversationError,
    UsageError,
    ValidationError,
)
from drupe.lifetimes import TaskOwner

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["CommandBus", "Handler", "NodeGone"]

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
_REPLY_TTL: Final = 60
_MAX_BACKOFF: Final = 2.0


class NodeGone(Exception):
    """No node listens on the target channel: the owner is dead."""


class CommandBus(TaskOwner):
    """Command routing of one node; enter it to start listening."""

    def __init__(
        self,
        redis: Redis,
        *,
        prefix: str,
        node_id: str,
        handlers: Mapping[str, Handler],
        timeout: float,
    ) -> None:
        self._redis = redis
        self.prefix = prefix
        self.node_id = node_id
        self.handlers = dict(handlers)
        self.timeout = timeout
        self._ready = anyio.Event()
        self.handled = 0

    def channel(self, node_id: str) -> str:
        return f"{self.prefix}:cmd:{node_id}"

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        group.start_soon(self._listen)
        with anyio.fail_after(10):
            await self._ready.wait()

    # --- caller ------------------------------------------------------------------------------

    async def call(
        self, node_id: str, kind: str, payload: dict[str, Any], *, wait: float | None = None
    ) -> dict[str, Any]:
        """Run ``kind`` on ``node_id`` and return its result (see the module docstring)."""
        request_id = uuid.uuid4().hex
        reply = f"{self.prefix}:reply:{request_id}"
        message = orjson.dumps({"id": request_id, "kind": kind, "payload": payload, "reply": reply})
        wait = self.timeout if wait is None else wait
        try:
            receivers = await self._redis.publish(self.channel(node_id), message)
            if not receivers:
                raise NodeGone(node_id)
            answer: Any = await self._redis.blpop([reply], timeout=max(1, round(wait)))
        except (OSError, RedisError) as err:
            raise OwnerUnavailableError(
                f"cannot reach Redis to route {kind!r}: {err}", retry_after=1.0
            ) from err
        if answer is None:
            raise OwnerUnavailableError(
                f"node {node_id!r} did not answer {kind!r} within {wait:.0f} s", retry_after=wait
            )
        data = orjson.loads(answer[1])
        if "error" in data:
            raise _rebuild(data["error"])
        result: dict[str, Any] = data["result"]
        return result

    # --- owner -------------------------------------------------------------------------------

    async def _listen(self) -> None:
        backoff = 0.05
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel(self.node_id))
                self._ready.set()
                backoff = 0.05
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self.task_group.start_soon(self._handle, message["data"])
            except (OSError, RedisError) as err:
                log.warning("command channel lost (%s); resubscribing in %.2f s", err, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]

    async def _handle(self, raw: bytes) -> None:
        try:
            message = orjson.loads(raw)
            handler = self.handlers[message["kind"]]
        except (ValueError, KeyError):
            log.warning("unreadable command dropped: %r", raw[:200])
            return
        try:
            reply: dict[str, Any] = {"result": await handler(message["payload"])}
        except DrupeError as err:
            reply = {"error": _describe(err)}
        except Exception as err:  # isolation boundary: one command must not kill the bus
            log.exception("command %r failed", message["kind"])
            reply = {"error": {"type": "DrupeError", "message": f"internal error: {err}"}}
        self.handled += 1
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.rpush(message["reply"], orjson.dumps(reply))
                pipe.expire(message["reply"], _REPLY_TTL)
                await pipe.execute()
        except (OSError, RedisError) as err:
            log.warning("could not answer command %r: %s", message["kind"], err)


def _describe(err: DrupeError) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(err).__name__, "message": str(err)}
    if isinstance(err, AdmissionError):
        out["reason"] = err.reason
    if isinstance(err, NotOwnerError):
        out["conversation"] = err.conversation_id
        out["node"] = err.node_id
    if isinstance(err, OwnerUnavailableError):
        out["retryAfter"] = err.retry_after
    return out


_SIMPLE: Final[dict[str, type[DrupeError]]] = {
    "ValidationError": ValidationError,
    "UsageError": UsageError,
    "ConfigError": ConfigError,
    "PersistenceError": PersistenceError,
}


def _rebuild(data: dict[str, Any]) -> DrupeError:
    kind = data.get("type", "")
    message = str(data.get("message", ""))
    if kind == "AdmissionError":
        return AdmissionError(data.get("reason", "busy"), message)
    if kind == "NotOwnerError":
        return NotOwnerError(str(data.get("conversation", "")), str(data.get("node", "")))
    if kind == "OwnerUnavailableError":
        return OwnerUnavailableError(message, retry_after=float(data.get("retryAfter", 1.0)))
    if kind in ("UnknownConversationError", "NotFoundError"):
        cls = UnknownConversationError if kind == "UnknownConversationError" else NotFoundError
        error: DrupeError = cls.__new__(cls)
        DrupeError.__init__(error, message)
        return error
    return _SIMPLE.get(kind, DrupeError)(message)
