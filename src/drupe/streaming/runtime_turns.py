"""``RuntimeTurns``: turns a runtime host drives itself (agent sessions), not a user submit.

Contract:

* Hold policies are asked when a stream ends ``done``; True holds the stream open: its
  listeners hear ``is_conversation_done=False`` and it is not evicted. The policy's owner must
  then call ``start`` (a successor turn) or ``terminate``.
* ``start`` evicts the held (or grace) stream and starts a successor that inherits its carried
  subscribers, each receiving the successor's replay, so they never see an end between the two
  turns. A live conversation is refused (``AdmissionError("busy")``).
* ``terminate`` ends a held stream whose successor cannot launch: its subscribers get an error
  terminal and the status record says ``error``.
"""

from __future__ import annotations

from collections.abc import Callable

from drupe.errors import AdmissionError
from drupe.streaming.chaining import SteerChain
from drupe.streaming.contracts import HoldPolicy, SendInput, SendResult, Started
from drupe.streaming.listeners.base import SerializedError
from drupe.streaming.registry import StreamRegistry

__all__ = ["RuntimeTurns"]


class RuntimeTurns:
    """Hold policies, successor turns and the end of a held stream."""

    def __init__(
        self,
        *,
        registry: StreamRegistry,
        chain: SteerChain,
        send: Callable[[SendInput], SendResult],
    ) -> None:
        self._registry = registry
        self._chain = chain
        self._send = send
        self.policies: list[HoldPolicy] = []

    def holds(self, conversation_id: str) -> bool:
        """Whether a policy keeps the conversation's ``done`` stream open."""
        return any(policy(conversation_id) for policy in self.policies)

    def start(self, request: SendInput) -> Started:
        """Start a successor turn that inherits the previous stream's subscribers."""
        carried = self._registry.carried_listeners(request.conversation_id)
        current = self._registry.get(request.conversation_id)
        if current is not None and current.is_live:
            raise AdmissionError(
                "busy", f"conversation {request.conversation_id!r} already has a live stream"
            )
        if current is not None:
            current.chaining = False
            self._registry.evict(current)
        ids = {item.listener_id for item in request.listeners}
        listeners = [*request.listeners, *(c for c in carried if c.listener_id not in ids)]
        result = self._send(
            SendInput(
                conversation_id=request.conversation_id,
                executions=request.executions,
                listeners=listeners,
                siblings_group_id=request.siblings_group_id,
                persistent=request.persistent,
            )
        )
        if not isinstance(result, Started):
            raise AssertionError("a runtime turn with executions must start a stream")
        return result

    async def terminate(self, conversation_id: str, error: SerializedError) -> None:
        """End a held stream whose successor cannot launch: error its subscribers, then evict."""
        stream = self._registry.get(conversation_id)
        carried = self._registry.carried_listeners(conversation_id)
        if stream is not None:
            stream.chaining = False
            self._registry.evict(stream)
        await self._chain.fail_launch(conversation_id, stream, carried, error)
