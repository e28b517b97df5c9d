"""``[a2a.remotes.<id>]`` parsing, and which sessions are offered a remote agent's tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from drupe.errors import ConfigError
from drupe.sessions.drivers.base import ConnectTarget, PermissionMode
from drupe.sessions.drivers.inprocess.driver import session_tools
from drupe.tools.a2a.config import RemoteAgentConfig, load_remote_agents, parse_remote_agents
from drupe.tools.a2a.remote import remote_agent_tool


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
