"""End to end: the Claude Code driver with the REAL bundled CLI against a fake Messages API.

Not collected by the normal run (the file name does not start with ``test_``):
``test_cli_netns.py`` runs this module in a child pytest inside a loopback-only network
namespace (``unshare -n``), so the CLI can reach nothing but the fake on 127.0.0.1. Run it
directly while debugging: ``.venv/bin/pytest tests/sessions/claude_code/cli_e2e.py``.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from drupe.errors import DriverError
from drupe.sessions.drivers.base import (
    ChunkEvent,
    CompactionComplete,
    ConnectTarget,
    ErrorEvent,
    ResumeToken,
    SteerBoundary,
    SteerUndelivered,
    ToolApprovalRequest,
    TurnComplete,
    UserInput,
)
from drupe.sessions.drivers.claude_code import ClaudeCodeDriver
from drupe.testing.driver_check import check_driver
from drupe.tools.mcp.config import McpServerConfig
from tests.sessions.claude_code.cli_support import (
    MODEL,
    EventReader,
    chunks_of,
    connect_input,
    isolated_config,
    message_of,
    said,
)
from tests.sessions.claude_code.fake_api import (
    FakeClaudeApi,
    Reply,
    last_user_blocks,
    tool_results_in,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def bash(command: str, text: str = "let me run it") -> Reply:
    return Reply(text=text, tool=("Bash", {"command": command, "description": "run it"}))


def tool_then_text(first: Reply, final: str = "all done") -> Any:
    def script(body: dict[str, Any]) -> Reply:
        return Reply(text=final) if tool_results_in(body) else first

    return script


def texts_of(body: dict[str, Any]) -> str:
    return "\n".join(str(b.get("text", "")) for b in last_user_blocks(body))


def types_of(events: list[Any]) -> list[str]:
    return [e.chunk["type"] if isinstance(e, ChunkEvent) else e.type for e in events]


async def test_text_turn_streams_chunks_and_completes(tmp_path: Path) -> None:
    api = FakeClaudeApi(lambda body: Reply(text="hello from the fake"))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("hi"))
            events = await reader.turn()
        usage = await connection.context_usage()
        await connection.close()
        assert await connection.context_usage() is None

    assert usage is not None and usage["maxTokens"] > 0
    assert isinstance(events[-1], TurnComplete)
    assert sum(isinstance(e, ResumeToken) for e in events) == 1
    chunks = chunks_of(events)
    assert [c["type"] for c in chunks][:2] == ["start-step", "text-start"]
    assert chunks[-1]["type"] == "message-metadata"
    assert chunks[-1]["messageMetadata"]["usage"]["outputTokens"] > 0
    message = message_of(chunks)
    assert [p["text"] for p in message["parts"] if p["type"] == "text"] == ["hello from the fake "]
    assert api.requests[0]["model"] == MODEL
    assert texts_of(api.requests[0]).endswith("hi")


async def test_tool_turn_runs_the_real_bash_tool(tmp_path: Path) -> None:
    api = FakeClaudeApi(tool_then_text(bash("echo hi-from-tool")))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("run it"))
            events = await reader.turn()
        await connection.close()

    assert isinstance(events[-1], TurnComplete)
    chunks = chunks_of(events)
    kinds = [c["type"] for c in chunks]
    assert kinds.count("start-step") == 2 == kinds.count("finish-step")
    assert kinds.index("tool-input-start") < kinds.index("tool-input-available")
    assert kinds.index("tool-input-available") < kinds.index("tool-output-available")
    output = next(c for c in chunks if c["type"] == "tool-output-available")
    assert output["toolCallId"] == "toolu_1"
    assert "hi-from-tool" in output["output"]
    message = message_of(chunks)
    tool = next(p for p in message["parts"] if p["type"] == "tool-Bash")
    assert tool["state"] == "output-available"
    assert tool["input"]["command"] == "echo hi-from-tool"
    assert len(api.requests) == 2
    assert tool_results_in(api.requests[1])


async def test_resume_token_is_emitted_once_per_session(tmp_path: Path) -> None:
    api = FakeClaudeApi(lambda body: Reply(text=f"answer {len(body['messages'])}"))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("first"))
            first = await reader.turn()
            await connection.send(said("second"))
            second = await reader.turn()
        await connection.close()
        tokens = [e.token for e in first + second if isinstance(e, ResumeToken)]
        assert len(tokens) == 1

        # A cold connect with the token resumes the same CLI session: no new token, and the
        # model sees the earlier turns.
        resumed = await driver.connect(connect_input(tmp_path, resume_token=tokens[0]))
        async with EventReader(resumed) as reader:
            await resumed.send(said("third"))
            third = await reader.turn()
        await resumed.close()

    assert not [e for e in third if isinstance(e, ResumeToken)]
    assert isinstance(third[-1], TurnComplete)
    history = " ".join(str(m["content"]) for m in api.requests[-1]["messages"])
    assert "first" in history and "second" in history and "third" in history


async def test_approval_allow_runs_the_tool(tmp_path: Path) -> None:
    api = FakeClaudeApi(tool_then_text(bash("touch approved.txt")))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("make a file"))
            asked = await reader.until(ToolApprovalRequest)
            request = asked[-1]
            assert isinstance(request, ToolApprovalRequest)
            assert request.request.tool_name == "Bash"
            assert request.request.input["command"] == "touch approved.txt"
            assert await connection.respond_approval(request.request.approval_id, approved=True)
            assert not await connection.respond_approval(request.request.approval_id, approved=True)
            events = asked + await reader.turn()
        await connection.close()

    assert isinstance(events[-1], TurnComplete)
    assert (tmp_path / "workspace" / "approved.txt").exists()
    # The driver emits the approval EVENT (the host makes the UI chunk) after the tool's input
    # and before its output.
    kinds = [
        "approval" if isinstance(e, ToolApprovalRequest) else getattr(e, "chunk", {}).get("type")
        for e in events
    ]
    assert kinds.index("tool-input-available") < kinds.index("approval")
    assert kinds.index("approval") < kinds.index("tool-output-available")
    assert "tool-approval-request" not in kinds  # never twice: the host emits the chunk
    tool = next(p for p in message_of(chunks_of(events))["parts"] if p["type"] == "tool-Bash")
    assert tool["state"] == "output-available"


async def test_approval_deny_answers_the_model_with_the_reason(tmp_path: Path) -> None:
    api = FakeClaudeApi(tool_then_text(bash("touch denied.txt")))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("make a file"))
            asked = await reader.until(ToolApprovalRequest)
            request = asked[-1]
            assert isinstance(request, ToolApprovalRequest)
            await connection.respond_approval(
                request.request.approval_id, approved=False, reason="human said no"
            )
            events = asked + await reader.turn()
        await connection.close()

    assert isinstance(events[-1], TurnComplete)
    assert not (tmp_path / "workspace" / "denied.txt").exists()
    kinds = [c["type"] for c in chunks_of(events)]
    assert "tool-output-denied" not in kinds  # the host emits it when it relays the denial
    assert "tool-output-error" not in kinds and "tool-output-available" not in kinds
    result = next(b for b in last_user_blocks(api.requests[1]) if b["type"] == "tool_result")
    assert result["is_error"] is True
    assert "human said no" in str(result["content"])


async def test_headless_turn_is_denied_without_asking(tmp_path: Path) -> None:
    api = FakeClaudeApi(tool_then_text(bash("touch headless.txt")))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("make a file", headless=True))
            events = await reader.turn()
        await connection.close()

    assert isinstance(events[-1], TurnComplete)
    assert not any(isinstance(e, ToolApprovalRequest) for e in events)
    assert "tool-output-denied" in [c["type"] for c in chunks_of(events)]
    assert not (tmp_path / "workspace" / "headless.txt").exists()


async def test_steer_is_injected_by_the_hook_and_emits_the_boundary(tmp_path: Path) -> None:
    first = bash("echo working", text="working on it")
    first.hold = True
    api = FakeClaudeApi(tool_then_text(first, final="ok, switching to bananas"))
    steer = said("talk about bananas instead", reminder=True)
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            assert not await connection.redirect(steer)  # no turn yet
            await connection.send(said("write a poem"))
            await first.held.wait()
            assert await connection.redirect(steer)
            file_part: Any = {"type": "file", "url": "data:image/png;base64,AA", "mediaType": "p"}
            with_file = UserInput(message={"id": "f", "role": "user", "parts": [file_part]})
            assert not await connection.redirect(with_file)
            first.release.set()
            events = await reader.turn()
        await connection.close()

    assert isinstance(events[-1], TurnComplete)
    assert not any(isinstance(e, SteerUndelivered) for e in events)
    boundaries = [i for i, e in enumerate(events) if isinstance(e, SteerBoundary)]
    assert len(boundaries) == 1
    boundary = events[boundaries[0]]
    assert isinstance(boundary, SteerBoundary) and boundary.inputs == (steer,)
    kinds = types_of(events)
    at = boundaries[0]
    # Before the boundary: the first message and its tool result (A1a); right after it: the
    # next message's step, whose text answers the steer (A2).
    assert "tool-output-available" in kinds[:at]
    assert kinds[at + 1] == "start-step"
    after = message_of(chunks_of(events[at + 1 :]))
    assert [p["text"] for p in after["parts"] if p["type"] == "text"] == [
        "ok, switching to bananas "
    ]
    reminder = texts_of(api.requests[1])
    assert "<system-reminder>" in reminder
    assert "talk about bananas instead" in reminder


async def test_steer_never_injected_comes_back_undelivered(tmp_path: Path) -> None:
    reply = Reply(text="a short answer", hold=True)
    api = FakeClaudeApi(lambda body: reply)
    steer = said("one more thing")
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("hi"))
            await reply.held.wait()
            assert await connection.redirect(steer)
            with pytest.raises(DriverError, match="already running"):
                await connection.send(said("a second turn"))
            reply.release.set()
            events = await reader.turn()
        await connection.close()

    assert isinstance(events[-1], TurnComplete)
    assert not any(isinstance(e, SteerBoundary) for e in events)
    undelivered = [e for e in events if isinstance(e, SteerUndelivered)]
    assert len(undelivered) == 1 and undelivered[0].inputs == (steer,)
    assert len(api.requests) == 1


async def test_reconcile_verdicts_current_patched_rebuild_failed_invalid(
    tmp_path: Path,
) -> None:
    api = FakeClaudeApi(lambda body: Reply(text="fine"))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        target = ConnectTarget(model_id=MODEL)
        assert await connection.reconcile(target) == "current"
        assert await connection.reconcile(ConnectTarget(model_id="claude-opus-4-1")) == "patched"
        assert await connection.reconcile(ConnectTarget(model_id="claude-opus-4-1")) == "current"
        accept = ConnectTarget(model_id="claude-opus-4-1", permission_mode="accept-edits")
        assert await connection.reconcile(accept) == "patched"
        rebuilt = ConnectTarget(model_id="claude-opus-4-1", instructions="be brief")
        assert await connection.reconcile(rebuilt) == "rebuild"
        # bypassPermissions cannot be hot-applied to a CLI launched without it: fail closed
        bypass = ConnectTarget(model_id="claude-opus-4-1", permission_mode="bypass")
        assert await connection.reconcile(bypass) == "failed"
        assert connection.frozen.permission_mode == "accept-edits"
        assert await connection.reconcile(ConnectTarget(model_id="")) == "invalid"
        async with EventReader(connection) as reader:
            await connection.send(said("hi"))
            events = await reader.turn()
        await connection.close()

    assert isinstance(events[-1], TurnComplete)
    # The CLI resolves the alias itself; what matters is that the new family is asked for.
    assert api.requests[-1]["model"].startswith("claude-opus")


async def test_close_is_idempotent_and_ends_the_events(tmp_path: Path) -> None:
    api = FakeClaudeApi(lambda body: Reply(text="fine"))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.close()
            await connection.close()
            assert await reader.rest() == []
        with pytest.raises(DriverError):
            await connection.send(said("hi"))
        assert await connection.reconcile(ConnectTarget(model_id=MODEL)) == "rebuild"
        assert not await connection.redirect(said("late"))


async def test_an_api_error_result_is_an_error_event(tmp_path: Path) -> None:
    api = FakeClaudeApi(lambda body: Reply(text="unused"))
    config = isolated_config(tmp_path, "http://127.0.0.1:9")  # nothing listens on port 9
    config = replace(config, env={**config.env, "CLAUDE_CODE_MAX_RETRIES": "0"})
    async with api.serve(), ClaudeCodeDriver(config) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("hi"))
            events = await reader.turn()
            assert await reader.rest() == []  # a failed turn tears the process down
        assert not connection.alive
        await connection.close()

    assert isinstance(events[-1], ErrorEvent)
    assert "message" in events[-1].error


async def test_an_idle_session_is_prewarmed_and_consumed_once(tmp_path: Path) -> None:
    api = FakeClaudeApi(lambda body: Reply(text=f"answer {len(body['messages'])}"))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("remember kiwi"))
            first = await reader.turn()
        await connection.close()
        token = next(e.token for e in first if isinstance(e, ResumeToken))

        await driver.on_session_idle("s1")
        assert driver.is_warm("s1")
        warm = await driver.connect(connect_input(tmp_path, resume_token=token))
        assert warm is not connection and warm.alive
        assert not driver.is_warm("s1")  # consumed at most once
        async with EventReader(warm) as reader:
            await warm.send(said("what fruit?"))
            second = await reader.turn()
        await warm.close()

        # A park whose settings no longer match is closed, never handed out.
        await driver.on_session_idle("s1")
        parked_then_changed = connect_input(tmp_path, resume_token=token, instructions="new")
        fresh = await driver.connect(parked_then_changed)
        assert not driver.is_warm("s1")
        await fresh.close()

    assert isinstance(second[-1], TurnComplete)
    history = " ".join(str(m["content"]) for m in api.requests[-1]["messages"])
    assert "remember kiwi" in history and "what fruit?" in history


async def test_manual_compaction_maps_to_compaction_events(tmp_path: Path) -> None:
    api = FakeClaudeApi(lambda body: Reply(text="a summary of the talk"))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        connection = await driver.connect(connect_input(tmp_path))
        async with EventReader(connection) as reader:
            await connection.send(said("hello"))
            await reader.turn()
            await connection.send(said("/compact"))
            events = await reader.turn()
        await connection.close()

    # status compacting, status compact_result success, init, compact_boundary, result: one
    # anchored complete (the success status alone does not settle when a boundary follows).
    # No context usage: it is fetched only on request (issue 23.2).
    assert types_of(events) == [
        "compaction-start",
        "compaction-complete",
        "message-metadata",
        "turn-complete",
    ]
    complete = events[1]
    assert isinstance(complete, CompactionComplete) and complete.anchor is not None
    assert complete.anchor.trigger == "manual"
    assert complete.anchor.pre_tokens > 0


async def test_the_claude_code_driver_passes_the_driver_conformance_check(tmp_path: Path) -> None:
    api = FakeClaudeApi(lambda body: Reply(text="conforming"))
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        report = await check_driver(
            driver, connect_input(tmp_path).session, try_redirect=True, within_s=30
        )
    assert report.steerable
    assert report.redirect_result is True  # the turn was live: the steer was stashed
    assert report.verdict == "current"
    assert any(isinstance(e, SteerUndelivered) for e in report.events)  # never injected


async def test_a_resume_token_the_cli_does_not_know_fails_the_connect(tmp_path: Path) -> None:
    api = FakeClaudeApi(lambda body: Reply(text="unused"))
    unknown = "6c1f7a52-0000-4000-8000-000000000000"
    async with api.serve() as url, ClaudeCodeDriver(isolated_config(tmp_path, url)) as driver:
        with pytest.raises(DriverError, match="No conversation found"):
            await driver.connect(connect_input(tmp_path, resume_token=unknown))
    assert api.requests == []  # surfaced, never replayed as a fresh session


async def test_a_selected_mcp_server_is_given_to_the_cli(tmp_path: Path) -> None:
    demo = Path(__file__).parents[2] / "tools" / "mcp_servers" / "demo_server.py"
    server = McpServerConfig(id="demo", command=sys.executable, args=(str(demo),))
    call = Reply(text="adding", tool=("mcp__demo__add", {"a": 2, "b": 40}))
    api = FakeClaudeApi(tool_then_text(call, final="it is 42"))
    config = replace(isolated_config(tmp_path, "unused"), mcp_servers={"demo": server})
    base = connect_input(tmp_path)
    with_mcp = replace(base, session=replace(base.session, mcp_servers=("demo",)))
    async with (
        api.serve() as url,
        ClaudeCodeDriver(replace(config, env={**config.env, "ANTHROPIC_BASE_URL": url})) as driver,
    ):
        connection = await driver.connect(with_mcp)
        async with EventReader(connection) as reader:
            await connection.send(said("add 2 and 40"))
            events: list[Any] = []
            while not isinstance(events[-1:] and events[-1], TurnComplete | ErrorEvent):
                event = await reader.next()
                events.append(event)
                if isinstance(event, ToolApprovalRequest):
                    await connection.respond_approval(event.request.approval_id, approved=True)
        await connection.close()

    assert isinstance(events[-1], TurnComplete)
    # The CLI defers MCP tools behind ToolSearch, so the tool is not in the request's list;
    # it ran in the real server (through an approval: MCP tools are not read-only).
    asked = [e for e in events if isinstance(e, ToolApprovalRequest)]
    assert [e.request.tool_name for e in asked] == ["mcp__demo__add"]
    output = next(c for c in chunks_of(events) if c["type"] == "tool-output-available")
    assert "42" in str(output["output"])
