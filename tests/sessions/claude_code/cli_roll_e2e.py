"""End to end through the HOST: the steer-boundary roll with the real Claude Code CLI.

A session turn runs through the real dispatcher, stream manager, agent-session host and SQLite,
with the Claude Code driver running the real bundled CLI against the fake Messages API. A steer
sent while the fake holds the first response (before its tool call) is redirected into the live
turn, injected by the ``PreToolUse`` hook, and the boundary rolls the answer: the rows read
U1, A1a, U2 (the steer), A2, and A2 is the answer that continues after the steer.

Like ``cli_e2e.py`` this module is run by ``test_cli_netns.py`` in a loopback-only namespace.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from drupe.sessions.drivers.claude_code import ClaudeCodeDriver
from drupe.sessions.state import Idle
from drupe.streaming.listeners.base import StreamEvent
from tests.sessions.claude_code.cli_support import DEADLINE_S, MODEL, isolated_config
from tests.sessions.claude_code.fake_api import FakeClaudeApi, Reply, tool_results_in
from tests.sessions.support import Watcher, open_env, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


async def test_a_steer_mid_turn_rolls_rows_u1_a1a_u2_a2(tmp_path: Path) -> None:
    first = Reply(
        text="working on it",
        tool=("Bash", {"command": "echo poem-draft", "description": "draft"}),
        hold=True,
    )

    def script(body: dict[str, Any]) -> Reply:
        return Reply(text="ok, bananas it is") if tool_results_in(body) else first

    api = FakeClaudeApi(script)
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with (
        api.serve() as base_url,
        ClaudeCodeDriver(isolated_config(tmp_path, base_url)) as driver,
        open_env(url, driver=driver) as env,
    ):  # type: ignore[arg-type]
        agent = await env.db.agents.create_agent(
            name="coder",
            driver_type="claude-code",
            model_id=MODEL,
            workspace=str(tmp_path / "workspace"),
        )
        session = await env.db.agents.create_session(agent.id)
        sid = session.id
        watcher = Watcher()
        with anyio.fail_after(DEADLINE_S):
            u1 = await env.submit(sid, "write a poem", [watcher])
            await first.held.wait()
            u2 = await env.submit(sid, "talk about bananas instead")
            first.release.set()
            await watcher.wait_terminals(2)
            await env.manager.wait_settled(f"agent-session:{sid}")
            await env.wait_for(lambda: env.entry(sid).state.execution == Idle())
        rows = await env.rows(sid)

    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("user", "success"),
        ("assistant", "success"),
    ]
    row_u1, a1a, row_u2, a2 = rows
    assert row_u1.id == u1.user_message_id and row_u2.id == u2.user_message_id
    assert a1a.parent_id == row_u1.id and a2.parent_id == row_u2.id
    # A1a: the text before the steer and the tool call it made, with its output.
    assert text_of(a1a).strip() == "working on it"
    tool = next(p for p in a1a.parts if p["type"] == "tool-Bash")
    assert tool["state"] == "output-available" and "poem-draft" in tool["output"]
    # A2 continues after the steer: the model's next message, which saw the steer.
    assert text_of(a2).strip() == "ok, bananas it is"
    assert not [p for p in a2.parts if p["type"] == "tool-Bash"]
    assert "talk about bananas instead" in "\n".join(
        str(b.get("text", "")) for b in api.requests[1]["messages"][-1]["content"]
    )
    # The subscriber saw A1a end (held stream) and A2 end the conversation.
    assert [t.status for t in watcher.terminals] == ["success", "success"]
    assert watcher.terminals[0].is_conversation_done is False
    assert watcher.terminals[1].is_conversation_done is True
    # One CLI request per model message: the steer was never re-sent as a new turn.
    assert len(api.requests) == 2


class ApprovalWatcher(Watcher):
    """A subscriber that wakes the test when an approval request reaches the stream."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = anyio.Event()
        self.approval_id = ""

    def on_chunk(self, event: StreamEvent) -> None:
        super().on_chunk(event)
        if event.chunk.get("type") == "tool-approval-request" and not self.approval_id:
            self.approval_id = event.chunk["approvalId"]
            self.asked.set()


@pytest.mark.parametrize("approved", [True, False])
async def test_an_agent_approval_is_answered_in_place_through_the_host(
    tmp_path: Path, approved: bool
) -> None:
    first = Reply(
        text="making it", tool=("Bash", {"command": "touch made.txt", "description": "x"})
    )

    def script(body: dict[str, Any]) -> Reply:
        return Reply(text="finished") if tool_results_in(body) else first

    api = FakeClaudeApi(script)
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with (
        api.serve() as base_url,
        ClaudeCodeDriver(isolated_config(tmp_path, base_url)) as driver,
        open_env(url, driver=driver) as env,
    ):  # type: ignore[arg-type]
        agent = await env.db.agents.create_agent(
            name="coder",
            driver_type="claude-code",
            model_id=MODEL,
            workspace=str(tmp_path / "workspace"),
        )
        sid = (await env.db.agents.create_session(agent.id)).id
        watcher = ApprovalWatcher()
        with anyio.fail_after(DEADLINE_S):
            await env.submit(sid, "make a file", [watcher])
            await watcher.asked.wait()
            assert await env.host.respond_approval(
                sid, watcher.approval_id, approved=approved, reason="not today"
            )
            await watcher.wait_terminals(1)
            await env.manager.wait_settled(f"agent-session:{sid}")
        rows = await env.rows(sid)

    assert [(r.role, r.status) for r in rows] == [("user", "success"), ("assistant", "success")]
    tool = next(p for p in rows[1].parts if p["type"] == "tool-Bash")
    assert (tmp_path / "workspace" / "made.txt").exists() is approved
    if approved:
        assert tool["state"] == "output-available"
    else:
        assert tool["state"] == "output-denied"
        result = next(
            b for b in api.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"
        )
        assert "not today" in str(result["content"])
    assert text_of(rows[1]).strip().endswith("finished")


_CLI_INTERRUPT_FILLER = "No response requested."


def _cli_processes() -> list[int]:
    """Live (not zombie) Claude Code CLI children of this test process, from ``/proc``."""
    pids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == os.getpid() and state != "Z" and b"claude" in cmdline:
            pids.append(int(entry.name))
    return pids


def _assistant_content(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The assistant texts and tool calls a request replays to the model."""
    texts: list[str] = []
    tools: list[str] = []
    for message in body["messages"]:
        if message["role"] != "assistant":
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block.get("type") == "text":
                texts.append(str(block["text"]))
            elif block.get("type") == "tool_use":
                tools.append(str(block.get("id")))
    return texts, tools


async def test_stop_ends_the_cli_and_the_next_turn_sees_only_what_was_streamed(
    tmp_path: Path,
) -> None:
    """Issue 8 point 1: after Stop returns, the old CLI has exited and calls the API no more,
    and the next turn's request carries no assistant content the user never saw."""
    first = Reply(
        text="step one",
        tool=("Bash", {"command": "echo secret-step-two", "description": "two"}),
        hold=True,
    )

    def script(body: dict[str, Any]) -> Reply:
        if tool_results_in(body):
            return Reply(text="an answer nobody saw")
        last = body["messages"][-1]["content"]
        text = last if isinstance(last, str) else " ".join(str(b.get("text", "")) for b in last)
        return Reply(text="fresh answer") if "again" in text else first

    api = FakeClaudeApi(script)
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with (
        api.serve() as base_url,
        ClaudeCodeDriver(isolated_config(tmp_path, base_url)) as driver,
        open_env(url, driver=driver) as env,
    ):  # type: ignore[arg-type]
        agent = await env.db.agents.create_agent(
            name="coder",
            driver_type="claude-code",
            model_id=MODEL,
            workspace=str(tmp_path / "workspace"),
        )
        sid = (await env.db.agents.create_session(agent.id)).id
        watcher = Watcher()
        with anyio.fail_after(DEADLINE_S):
            await env.submit(sid, "go", [watcher])
            await first.held.wait()
            await watcher.wait_text("step one")
            assert len(_cli_processes()) == 1
            await env.host.stop(sid)
            # Stop returned: the old CLI process is gone, so it can call the API no more.
            assert _cli_processes() == []
            requests_at_stop = len(api.requests)
            first.release.set()  # had it lived on, it would now run the tool and ask again
            rows = await env.rows(sid)
            assert rows[-1].status == "paused"
            streamed = text_of(rows[-1])
            again = Watcher("wc:2")
            await env.submit(sid, "again", [again])
            await again.wait_terminals(1)
            await env.manager.wait_settled(f"agent-session:{sid}")
        rows = await env.rows(sid)

    assert "step one" in streamed and "secret" not in streamed
    # Exactly one more request: the next turn's own; none from the stopped process.
    assert len(api.requests) == requests_at_stop + 1
    texts, tools = _assistant_content(api.requests[-1])
    assert tools == [], "the next turn replays a tool call the user never saw"
    # Model output in the replay is only what was streamed; the CLI's own filler after an
    # interrupt ("No response requested.") is not model output.
    model_texts = [t for t in texts if t.strip() and t.strip() != _CLI_INTERRUPT_FILLER]
    assert model_texts and all(t.strip() in streamed for t in model_texts), texts
    assert "an answer nobody saw" not in str(api.requests[-1])
    assert text_of(rows[-1]).strip() == "fresh answer"


async def test_provider_retries_reach_subscribers_and_context_usage_is_published(
    tmp_path: Path,
) -> None:
    """Issue 8 point 4: the CLI's ``api_retry`` becomes transient ``data-retry`` chunks, and
    the session's context usage and slash commands reach the entry (REST) and the stream."""
    calls = {"n": 0}

    def script(body: dict[str, Any]) -> Reply:
        calls["n"] += 1
        return Reply(status=429) if calls["n"] == 1 else Reply(text="after the retry")

    api = FakeClaudeApi(script)
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with (
        api.serve() as base_url,
        ClaudeCodeDriver(isolated_config(tmp_path, base_url)) as driver,
        open_env(url, driver=driver) as env,
    ):  # type: ignore[arg-type]
        agent = await env.db.agents.create_agent(
            name="coder",
            driver_type="claude-code",
            model_id=MODEL,
            workspace=str(tmp_path / "workspace"),
        )
        sid = (await env.db.agents.create_session(agent.id)).id
        watcher = Watcher()
        with anyio.fail_after(DEADLINE_S):
            await env.submit(sid, "hi", [watcher])
            end = await watcher.wait_terminals(1)
            await env.manager.wait_settled(f"agent-session:{sid}")
        entry = env.entry(sid)
        rows = await env.rows(sid)
        kinds = [e.chunk["type"] for e in watcher.events]
        assert entry.context_usage is None and api.count_tokens == 0  # nobody read it yet
        with anyio.fail_after(DEADLINE_S):
            usage = await env.host.refresh_context_usage(sid)

    assert end.status == "success"
    retry = next(e.chunk for e in watcher.events if e.chunk["type"] == "data-retry")
    assert retry["transient"] is True and retry["data"]["statusCode"] == 429
    assert retry["data"]["attempt"] == 2
    assert kinds.index("data-retry") < kinds.index("text-delta")
    assert "data-session-commands" in kinds and "data-context-usage" not in kinds
    assert usage is not None and usage["maxTokens"] > 0
    assert entry.commands and "compact" in entry.commands
    # Transient state chunks never enter the stored answer.
    assert {p["type"] for p in rows[-1].parts} <= {"text", "step-start"}
    assert text_of(rows[-1]).strip() == "after the retry"


def _all_text(body: dict[str, Any]) -> str:
    return str(body["messages"])


async def test_a_background_subagent_report_is_streamed_and_stored_as_its_own_row(
    tmp_path: Path,
) -> None:
    """Issue 23.1 with the real CLI: the ``Agent`` tool runs in the background (the CLI's
    default); after its result the CLI begins a turn by itself to report the subagent's
    answer, while the host still closes the first turn. That turn is streamed to the
    subscriber and stored as its own assistant row; nothing is refused or dropped.
    Issue 23.2: with nobody reading the context usage, the CLI sends no ``count_tokens``; one
    read fetches it once for the turn."""

    def script(body: dict[str, Any]) -> Reply:
        if "SUBAGENT-JOB" in str(body["messages"][0]):
            return Reply(text="found 3 bugs")
        if "task-notification" in _all_text(body):
            return Reply(text="the subagent found 3 bugs")
        if tool_results_in(body):
            return Reply(text="started it in the background")
        job = {
            "description": "find bugs",
            "prompt": "SUBAGENT-JOB find bugs",
            "subagent_type": "general-purpose",
        }
        return Reply(text="launching", tool=("Agent", job))

    api = FakeClaudeApi(script)
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with (
        api.serve() as base_url,
        ClaudeCodeDriver(isolated_config(tmp_path, base_url)) as driver,
        open_env(url, driver=driver) as env,
    ):  # type: ignore[arg-type]
        agent = await env.db.agents.create_agent(
            name="coder",
            driver_type="claude-code",
            model_id=MODEL,
            workspace=str(tmp_path / "workspace"),
        )
        sid = (await env.db.agents.create_session(agent.id)).id
        watcher = Watcher()
        with anyio.fail_after(DEADLINE_S * 2):
            await env.submit(sid, "find bugs in the background", [watcher])
            await watcher.wait_text("the subagent found 3 bugs")
            await watcher.wait_terminals(2)
            await env.manager.wait_settled(f"agent-session:{sid}")
            await env.wait_for(lambda: not env.host.is_busy(sid))
        rows = await env.rows(sid)
        log = list(env.entry(sid).log)
        fetched_before_read = api.count_tokens
        with anyio.fail_after(DEADLINE_S):
            usage = await env.host.refresh_context_usage(sid)
            fetched_once = api.count_tokens
            assert await env.host.refresh_context_usage(sid) == usage
        fetched_twice = api.count_tokens

    assert [(r.role, r.status) for r in rows] == [
        ("user", "success"),
        ("assistant", "success"),
        ("assistant", "success"),  # the CLI's own turn, no user row above it
    ]
    _u1, a1, report = rows
    assert "started it in the background" in text_of(a1)
    assert report.parent_id == a1.id
    assert text_of(report).strip() == "the subagent found 3 bugs"
    assert [t.status for t in watcher.terminals] == ["success", "success"]
    assert not [line for line in log if "invalid" in line or "dropped" in line], log
    assert fetched_before_read == 0
    assert usage is not None and fetched_once > 0
    assert fetched_twice == fetched_once  # at most once per turn
