"""``check_driver``: the conformance check every agent-runtime driver must pass.

It runs one turn through ``driver`` the way the host does, and checks the contract of
``drupe.sessions.drivers.base``: ``validate_session`` accepts the session; ``connect`` returns a
``Connection``; after ``send``, ``events()`` yields only ``RuntimeEvent`` values, the turn's
chunks are dicts with a string ``type``, and the turn ends with exactly one ``turn-complete``
(or ``error`` when ``expect_error``); ``reconcile`` returns a known verdict; ``redirect``, when
present, returns a bool; ``close`` is idempotent and ends ``events()``. The fake driver, the
in-process driver and the Claude Code driver all run it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args

import anyio

from drupe.chunks.types import Chunk, UIMessage
from drupe.sessions.drivers.base import (
    ChunkEvent,
    ConnectInput,
    Connection,
    ConnectTarget,
    Driver,
    ErrorEvent,
    ReconcileVerdict,
    RuntimeEvent,
    SessionInfo,
    TurnComplete,
    UserInput,
)

__all__ = ["DriverReport", "check_driver"]

_EVENT_TYPES = tuple(get_args(RuntimeEvent))


@dataclass(slots=True)
class DriverReport:
    """What the check saw (for assertions beyond the contract)."""

    events: list[RuntimeEvent] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    verdict: ReconcileVerdict | None = None
    steerable: bool = False
    redirect_result: bool | None = None


async def check_driver(
    driver: Driver,
    session: SessionInfo,
    *,
    prompt: str = "hello",
    within_s: float = 60.0,
    expect_error: bool = False,
    try_redirect: bool = False,
    before_send: Any = None,
) -> DriverReport:
    """Run one turn through ``driver``; raise ``AssertionError`` on a contract breach."""
    report = DriverReport()
    assert isinstance(driver.type, str) and driver.type, "a driver needs a type"
    driver.validate_session(session)
    connection = await driver.connect(ConnectInput(session=session, model_id=session.model_id))
    assert isinstance(connection, Connection), f"{connection!r} is not a Connection"
    report.steerable = driver.capabilities.steer
    if report.steerable:
        assert callable(getattr(connection, "redirect", None)), "steer declared, no redirect"
    if driver.capabilities.context_usage:
        assert callable(getattr(connection, "context_usage", None)), "no context_usage"
    if before_send is not None:
        before_send(connection)
    try:
        with anyio.fail_after(within_s):
            events = connection.events()
            message: UIMessage = {
                "id": "check-user-1",
                "role": "user",
                "parts": [{"type": "text", "text": prompt}],
            }
            await connection.send(UserInput(message=message))
            if try_redirect and report.steerable:
                steer: UIMessage = {
                    "id": "check-user-2",
                    "role": "user",
                    "parts": [{"type": "text", "text": "also"}],
                }
                result = await connection.redirect(UserInput(message=steer, system_reminder=True))  # type: ignore[attr-defined, unused-ignore]
                assert isinstance(result, bool), "redirect must return a bool"
                report.redirect_result = result
            async for event in events:
                assert isinstance(event, _EVENT_TYPES), f"{event!r} is not a RuntimeEvent"
                report.events.append(event)
                if isinstance(event, ChunkEvent):
                    assert isinstance(event.chunk, dict), "a chunk is a dict"
                    assert isinstance(event.chunk.get("type"), str), "a chunk has a string type"
                    report.chunks.append(event.chunk)
                if isinstance(event, TurnComplete | ErrorEvent):
                    break
        ends = [e for e in report.events if isinstance(e, TurnComplete | ErrorEvent)]
        assert len(ends) == 1, f"a turn ends exactly once, saw {ends!r}"
        wanted = ErrorEvent if expect_error else TurnComplete
        assert isinstance(ends[0], wanted), f"the turn ended with {ends[0]!r}"
        verdict = await connection.reconcile(ConnectTarget.of(session))
        assert verdict in get_args(ReconcileVerdict), f"unknown verdict {verdict!r}"
        report.verdict = verdict
    finally:
        await connection.close()
        await connection.close()  # idempotent
    with anyio.fail_after(within_s):
        async for _event in connection.events():
            pass
    return report
