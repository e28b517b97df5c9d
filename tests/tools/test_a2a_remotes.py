"""``[a2a.remotes.<id>]`` parsing, and which sessions are offered a remote agent's tool."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from drupe.errors import ConfigError, ToolError
from drupe.sessions.drivers.base import ConnectTarget, PermissionMode
from drupe.sessions.drivers.inprocess.driver import session_tools
from drupe.tools.a2a.config import RemoteAgentConfig, load_remote_agents, parse_remote_agents
from drupe.tools.a2a.remote import RemoteTask, remote_agent_tool


def test_a_base_url_or_a_card_url_names_the_card() -> None:
    remotes = parse_remote_agents(
        {
            "a2a": {
                "remotes": {
                    "one": {"url": "https://x.test/a2a/1/", "token_env": "K"},
                    "two": {
                        "url": "https://x.test/a2a/2/.well-known/agent-card.json",
                        "timeout_s": 5,
                    },
                }
            }
        }
    )
    assert remotes == [
        RemoteAgentConfig("one", "https://x.test/a2a/1/.well-known/agent-card.json", "K"),
        RemoteAgentConfig("two", "https://x.test/a2a/2/.well-known/agent-card.json", timeout_s=5.0),
    ]
    assert remotes[0].tool_name == "a2a_one" and remotes[0].base_url == "https://x.test/a2a/1"
    assert parse_remote_agents({"default_model": "x"}) == []


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"url": "ftp://x"}, "http(s) URL"),
        ({"url": "https://x", "colour": "red"}, "unknown keys ['colour']"),
        ({"url": "https://x", "timeout_s": 0}, "positive"),
        ({"url": "https://x", "token_env": 3}, "token_env"),
    ],
)
def test_bad_tables_name_the_remote_and_the_key(table: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=r"\[a2a\.remotes\.r\]") as caught:
        parse_remote_agents({"a2a": {"remotes": {"r": table}}})
    assert words in str(caught.value)


def test_a_missing_file_has_no_remotes(tmp_path: Path) -> None:
    assert load_remote_agents(tmp_path / "none.toml") == []


def _target(tools: tuple[str, ...], mode: PermissionMode = "default") -> ConnectTarget:
    return ConnectTarget(model_id="m", tools=tools, permission_mode=mode)


def test_a_remote_tool_is_offered_only_when_the_agent_names_it(tmp_path: Path) -> None:
    tool = remote_agent_tool(RemoteAgentConfig("r", "https://x.test/.well-known/agent-card.json"))
    offered = session_tools(tmp_path, {}, _target(()), [tool])
    assert offered and "a2a_r" not in [e.name for e in offered]  # the workspace tools only
    assert [e.name for e in session_tools(tmp_path, {}, _target(("a2a_r",)), [tool])] == ["a2a_r"]
    assert session_tools(tmp_path, {}, _target(("a2a_r",), "plan"), [tool]) == []


def _status(state: int, text: str = "") -> StreamResponse:
    status = TaskStatus(state=state)  # type: ignore[arg-type]
    if text:
        status.message.CopyFrom(
            Message(message_id="s", role=Role.ROLE_AGENT, parts=[Part(text=text)])
        )
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(task_id="t", context_id="c", status=status)
    )


def _text(text: str, *, append: bool) -> StreamResponse:
    artifact = Artifact(artifact_id="a", parts=[Part(text=text)])
    update = TaskArtifactUpdateEvent(task_id="t", context_id="c", artifact=artifact, append=append)
    return StreamResponse(artifact_update=update)


def test_a_remote_task_is_followed_from_its_updates_and_progress_carries_its_texts_end() -> None:
    task = RemoteTask()
    assert task.take(_status(TaskState.TASK_STATE_WORKING, "thinking"))  # no task event first
    assert task.running()
    assert task.take(_text("a" * 10, append=False)) and task.take(_text("b" * 10, append=True))
    assert task.output(8) == {"taskId": "t", "contextId": "c", "state": "working",
                              "text": "b" * 8, "truncated": True, "status": "thinking"}  # fmt: skip
    assert task.take(_status(TaskState.TASK_STATE_COMPLETED))
    assert not task.running()
    assert task.result("a2a_r") == {"taskId": "t", "contextId": "c", "state": "completed",
                                    "text": "a" * 10 + "b" * 10}  # fmt: skip


def test_a_failed_task_raises_and_a_plain_message_is_an_answer() -> None:
    task = RemoteTask()
    task.take(_status(TaskState.TASK_STATE_FAILED, "no sources"))
    with pytest.raises(ToolError, match="the remote task failed: no sources"):
        task.result("a2a_r")
    direct = RemoteTask()
    said = Message(message_id="m", role=Role.ROLE_AGENT, context_id="c9", parts=[Part(text="hi")])
    assert not direct.take(StreamResponse(message=said))
    assert direct.result("a2a_r") == {"taskId": "", "contextId": "c9", "state": "completed",
                                      "text": "hi"}  # fmt: skip
    with pytest.raises(ToolError, match="answered no task"):
        RemoteTask().result("a2a_r")


def test_a_negative_progress_interval_is_refused() -> None:
    with pytest.raises(ConfigError, match="progress_interval_s"):
        parse_remote_agents(
            {"a2a": {"remotes": {"r": {"url": "https://x", "progress_interval_s": -1}}}}
        )
    (remote,) = parse_remote_agents(
        {"a2a": {"remotes": {"r": {"url": "https://x", "progress_interval_s": 0}}}}
    )
    assert remote.progress_interval_s == 0.0
