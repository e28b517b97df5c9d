"""Issue 8, buffers with no bound: each per-session buffer and map has a stated bound and an
overflow policy that ends visibly (docs/lifecycles/agent-session.md, "Bounds")."""

from __future__ import annotations

import anyio
import pytest

from drupe.errors import DriverError
from drupe.sessions.drivers.base import SessionInfo, TurnComplete
from drupe.sessions.drivers.outbox import EventOutbox
from drupe.sessions.state import Idle
from drupe.testing.fake_driver import text_turn
from tests.sessions.support import Env, Watcher, text_of


def _info(session_id: str) -> SessionInfo:
    return SessionInfo(
        session_id=session_id,
        agent_id="a",
        agent_name="coder",
        driver_type="fake",
        model_id="scripted:a",
    )


async def test_the_entry_map_forgets_the_least_recently_used_idle_session(env: Env) -> None:
    host = env.host
    host.max_entries = 2
    host.ensure_entry(_info("s1"))
    host.ensure_entry(_info("s2"))
    host.ensure_entry(_info("s1"))  # used again: s2 is now the least recently used
    host.ensure_entry(_info("s3"))
    assert list(host.entries) == ["s1", "s3"]
    # An entry that holds something (a pending approval) is never forgotten; when no entry
    # can go, a new session is refused with a clear error instead of growing the map.
    for sid in ("s1", "s3"):
        host.entries[sid].approvals["ap"] = ("call", False)
    with pytest.raises(DriverError, match="too many active agent sessions"):
        host.ensure_entry(_info("s4"))
    assert list(host.entries) == ["s1", "s3"]


async def test_a_roll_buffer_that_overflows_its_turn_stream_ends_the_turn_in_error(
    env: Env,
) -> None:
    env.host.turn_channel_limit = 3
    sid = await env.new_session()
    watcher = Watcher()
    first = await env.submit(sid, "one", [watcher])
    conn = await env.driver.wait_connections(1)
    await conn.wait_sends(1)
    conn.emit_chunks(text_turn(first.placeholder_ids[0], ["a"])[1:-1])
    await conn.wait_consumed()
    await env.submit(sid, "steer")
    await conn.wait_redirects(1)
    watcher.hold = anyio.Event()
    conn.boundary()
    # Six chunks wait for A2; its stream takes at most three at once.
    conn.emit_chunks(text_turn("a2", ["b", "c", "d"])[1:-1])
    await conn.wait_consumed()
    watcher.hold.set()
    end = await watcher.wait_terminals(2)
    assert end.status == "error" and end.error is not None
    assert "fell more than 3 chunks behind" in end.error["message"]
    await env.manager.wait_settled(f"agent-session:{sid}")
    await env.wait_for(lambda: env.entry(sid).state.execution == Idle())
    rows = await env.rows(sid)
    assert rows[-1].role == "assistant" and rows[-1].status == "error"
    assert text_of(rows[1]) == "a"
    assert any("overflowed its stream" in line for line in env.entry(sid).log)
    await conn.closed.wait()  # the runtime connection is dropped with the turn


async def test_a_driver_outbox_that_overflows_ends_its_events_with_an_error() -> None:
    outbox = EventOutbox(max_events=2)
    assert outbox.put(TurnComplete()) and outbox.put(TurnComplete())
    assert not outbox.put(TurnComplete())
    assert outbox.overflowed
    assert not outbox.put(TurnComplete())  # closed: nothing more is queued
    seen = []
    with pytest.raises(DriverError, match="overflowed"):
        async for event in outbox.events():
            seen.append(event)
    assert seen == [TurnComplete(), TurnComplete()]
