"""The Claude Code client's command channel: calls run on the task that owns the client.

Owns: ``ClientCommands``. The SDK's ``ClaudeSDKClient`` must only be used by the task that
connected it (its internal task group is bound to that task), so every client call (``query``,
``set_model``, ``set_permission_mode``, ``interrupt``, ``get_context_usage``) is queued here by
``call`` and run by ``serve``, which the owning task runs. ``call`` waits for its own call and
raises what it raised.

Bounded: at most ``limit`` calls in flight (one more raises ``DriverError``). ``close`` fails
every call still waiting with ``DriverError`` and refuses new ones.

Must never: run a call on any task but the one in ``serve``, or leave a caller waiting after
``close``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from claude_agent_sdk import ClaudeSDKClient

from drupe.errors import DriverError

__all__ = ["MAX_COMMANDS", "ClientCall", "ClientCommands"]

MAX_COMMANDS = 64
"""Client calls queued for the owning task at once (each caller waits for its own)."""

ClientCall = Callable[[ClaudeSDKClient], Awaitable[None]]

_CLOSED_DURING_CALL = "the Claude Code connection closed during a call"


@dataclass(slots=True, eq=False)
class _Command:
    call: ClientCall
    done: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None


class ClientCommands:
    """The queue of client calls between the callers and the owning task."""

    def __init__(self, limit: int = MAX_COMMANDS) -> None:
        self._limit = limit
        self._send: MemoryObjectSendStream[_Command]
        self._recv: MemoryObjectReceiveStream[_Command]
        self._send, self._recv = anyio.create_memory_object_stream(limit)
        self._pending: set[_Command] = set()

    async def call(self, call: ClientCall) -> None:
        """Run ``call`` on the owning task and wait for it; raises what it raised."""
        command = _Command(call)
        self._pending.add(command)
        try:
            self._send.send_nowait(command)
        except anyio.WouldBlock as exc:
            raise DriverError(f"more than {self._limit} CLI calls in flight") from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise DriverError("the Claude Code connection is closed") from exc
        await command.done.wait()
        if command.error is not None:
            raise command.error

    async def serve(self, client: ClaudeSDKClient) -> None:
        """Run the queued calls on ``client``, one at a time (the owning task runs this)."""
        async for command in self._recv:
            try:
                await command.call(client)
            except Exception as exc:
                command.error = exc
            except BaseException:
                command.error = DriverError(_CLOSED_DURING_CALL)
                raise
            finally:
                command.done.set()
                self._pending.discard(command)

    def close(self) -> None:
        """Fail every waiting call with ``DriverError`` and refuse new ones."""
        for command in self._pending:
            if not command.done.is_set():
                command.error = DriverError(_CLOSED_DURING_CALL)
                command.done.set()
        self._send.close()
