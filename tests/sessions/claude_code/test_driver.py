"""The Claude Code driver without the CLI: session validation, options, the steer holder,
user content, and the failures that never reach a process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drupe.errors import DriverError, UsageError, ValidationError
from drupe.sessions.drivers.base import ConnectInput, SessionInfo, UserInput
from drupe.sessions.drivers.claude_code import (
    ClaudeCodeConfig,
    ClaudeCodeConnection,
    ClaudeCodeDriver,
    SteerHolder,
    build_options,
)
from drupe.sessions.drivers.claude_code.content import user_content
from drupe.tools.mcp.config import McpServerConfig
from tests.sessions.claude_code.cli_support import said


def session(workspace: Path | None, **fields: Any) -> SessionInfo:
    return SessionInfo(
        session_id="s1",
        agent_id="a1",
        agent_name="coder",
        driver_type="claude-code",
        model_id="claude-sonnet-4-5",
        workspace=workspace,
        **fields,
    )


def test_validate_session_needs_a_workspace_that_exists_or_can_be_created(tmp_path: Path) -> None:
    driver = ClaudeCodeDriver()
    driver.validate_session(session(tmp_path))
    driver.validate_session(session(tmp_path / "new" / "deeper"))
    with pytest.raises(ValidationError, match="needs a workspace"):
        driver.validate_session(session(None))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValidationError, match="not a directory"):
        driver.validate_session(session(tmp_path / "file"))
    with pytest.raises(ValidationError, match="cannot be created"):
        driver.validate_session(session(tmp_path / "file" / "below"))


def test_build_options_resumes_by_token_and_never_continues(tmp_path: Path) -> None:
    info = session(
        tmp_path, instructions="be brief", tools=("Bash", "Read"), permission_mode="plan"
    )
    config = ClaudeCodeConfig(env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"})
    options = build_options(
        config, ConnectInput(session=info, model_id="claude-x", resume_token="tok"), tmp_path
    )
    assert options.resume == "tok"
    assert options.continue_conversation is False
    assert options.include_partial_messages is True
    assert options.model == "claude-x"
    assert options.cwd == tmp_path
    assert options.permission_mode == "plan"
    assert options.system_prompt == {
        "type": "preset",
        "preset": "claude_code",
        "append": "be brief",
    }
    assert options.tools == ["Bash", "Read"]
    assert options.env == {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}
    assert options.setting_sources == []
    plain = build_options(
        ClaudeCodeConfig(claude_code_prompt=False),
        ConnectInput(session=session(tmp_path), model_id="m"),
        tmp_path,
    )
    assert plain.resume is None
    assert plain.system_prompt == ""


async def test_connect_needs_the_driver_entered(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        await ClaudeCodeDriver().connect(ConnectInput(session=session(tmp_path), model_id="m"))


async def test_a_cli_that_cannot_start_raises_driver_error(tmp_path: Path) -> None:
    config = ClaudeCodeConfig(cli_path=tmp_path / "no-such-claude")
    async with ClaudeCodeDriver(config) as driver:
        with pytest.raises(DriverError, match="did not start"):
            await driver.connect(ConnectInput(session=session(tmp_path / "ws"), model_id="m"))
        # The driver's task group survived the failed start.
        with pytest.raises(DriverError):
            await driver.connect(ConnectInput(session=session(tmp_path / "ws"), model_id="m"))


def test_the_driver_declares_what_its_connections_can_do() -> None:
    caps = ClaudeCodeDriver.capabilities
    assert (caps.steer, caps.context_usage, caps.headless_runs, caps.idle_hook) == (
        True,
        True,
        True,
        True,
    )
    assert callable(ClaudeCodeConnection.redirect) and callable(ClaudeCodeConnection.context_usage)


def test_steer_holder_takes_text_only_steers_during_a_turn() -> None:
    holder = SteerHolder()
    assert not holder.offer(said("before any turn"))
    holder.begin_turn()
    image: Any = {"type": "file", "url": "data:image/png;base64,AA", "mediaType": "image/png"}
    assert not holder.offer(UserInput(message={"id": "x", "role": "user", "parts": [image]}))
    assert not holder.offer(UserInput(message={"id": "x", "role": "user", "parts": []}))
    first, second = said("one"), said("two")
    assert holder.offer(first) and holder.offer(second)
    assert holder.take_boundary() == ()  # nothing injected yet
    text = holder.inject()
    assert text is not None and "one" in text and "two" in text
    assert holder.inject() is None  # never handed out twice
    assert holder.take_boundary() == (first, second)
    assert holder.take_boundary() == ()
    third = said("three")
    holder.offer(third)
    assert holder.end_turn() == (third,)
    assert not holder.offer(said("after the turn"))


async def test_the_hook_leaves_subagent_tool_calls_alone() -> None:
    holder = SteerHolder()
    holder.begin_turn()
    holder.offer(said("steer"))
    assert await holder.pre_tool_use_hook({"agent_id": "sub-1"}, "t1", None) == {}
    out = await holder.pre_tool_use_hook({"tool_name": "Bash"}, "t2", None)
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert "steer" in context
    assert await holder.pre_tool_use_hook({"tool_name": "Bash"}, "t3", None) == {}


def test_user_content_wraps_steers_and_carries_images() -> None:
    assert user_content(said("hi")) == [{"type": "text", "text": "hi"}]
    wrapped = user_content(said("hi", reminder=True))[0]["text"]
    assert wrapped.startswith("<system-reminder>") and "hi" in wrapped
    image: Any = {"type": "file", "url": "data:image/png;base64,QUJD", "mediaType": "image/png"}
    doc: Any = {"type": "file", "url": "https://x/y.pdf", "mediaType": "application/pdf"}
    blocks = user_content(UserInput(message={"id": "x", "role": "user", "parts": [image, doc]}))
    assert blocks[0] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"},
    }
    assert blocks[1] == {"type": "text", "text": "[attached file: https://x/y.pdf]"}


def test_a_sessions_mcp_selection_picks_from_the_configured_servers(tmp_path: Path) -> None:
    servers = {
        "files": McpServerConfig(id="files", command="mcp-files", args=("--root", "/srv")),
        "search": McpServerConfig(
            id="search", transport="http", url="http://127.0.0.1:1/mcp", headers={"A": "b"}
        ),
    }
    driver = ClaudeCodeDriver(ClaudeCodeConfig(mcp_servers=servers))
    info = session(tmp_path, mcp_servers=("search", "files"))
    driver.validate_session(info)
    options = build_options(driver.config, ConnectInput(session=info, model_id="m"), tmp_path)
    assert options.mcp_servers == {
        "search": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"A": "b"}},
        "files": {"type": "stdio", "command": "mcp-files", "args": ["--root", "/srv"], "env": {}},
    }
    with pytest.raises(ValidationError, match="unknown MCP servers"):
        driver.validate_session(session(tmp_path, mcp_servers=("nope",)))
