"""Remote A2A agents from ``config.toml``: the ``[a2a.remotes.<id>]`` tables (pure parsing).

```toml
[a2a.remotes.researcher]
url = "https://agents.example.org/a2a/abc/.well-known/agent-card.json"
token_env = "RESEARCHER_KEY"   # optional: the bearer token, read from this variable
description = "Finds and summarises sources"   # optional: else the card's description
timeout_s = 600                # optional: the longest a call may take (default 600)
progress_interval_s = 0.25     # optional: at most one progress report per this many seconds
                               # (default 0.25; 0: every update the remote streams)
```

``url`` is the agent card's URL, or the agent's base URL (the card is then at
``<url>/.well-known/agent-card.json``). The tool is named ``a2a_<id>``; an agent is offered it
when its ``tools`` name it. A bad table raises ``ConfigError`` naming the remote and the key.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drupe.errors import ConfigError

__all__ = ["CARD_SUFFIX", "RemoteAgentConfig", "load_remote_agents", "parse_remote_agents"]

CARD_SUFFIX = "/.well-known/agent-card.json"
_KEYS = frozenset(("url", "token_env", "description", "timeout_s", "progress_interval_s"))
_ID = re.compile(r"^[A-Za-z0-9_-]{1,48}$")


@dataclass(frozen=True, slots=True)
class RemoteAgentConfig:
    id: str
    card_url: str
    token_env: str | None = None
    description: str | None = None
    timeout_s: float = 600.0
    progress_interval_s: float = 0.25

    @property
    def tool_name(self) -> str:
        return f"a2a_{self.id}"

    @property
    def base_url(self) -> str:
        return self.card_url.removesuffix(CARD_SUFFIX)


def parse_remote_agents(data: Mapping[str, Any]) -> list[RemoteAgentConfig]:
    remotes = data.get("a2a", {}).get("remotes", {}) if isinstance(data.get("a2a"), dict) else {}
    if not isinstance(remotes, dict):
        raise ConfigError("[a2a.remotes] must be a table of tables")
    out = []
    for remote_id, table in remotes.items():
        where = f"[a2a.remotes.{remote_id}]"
        if not _ID.match(remote_id):
            raise ConfigError(f"{where}: the id has 1 to 48 letters, digits, '_' or '-'")
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table")
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown keys {unknown}; known: {sorted(_KEYS)}")
        url = table.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: url must be the agent card's http(s) URL")
        token_env = table.get("token_env")
        if token_env is not None and not isinstance(token_env, str):
            raise ConfigError(f"{where}: token_env must be the name of an environment variable")
        description = table.get("description")
        if description is not None and not isinstance(description, str):
            raise ConfigError(f"{where}: description must be text")
        timeout = table.get("timeout_s", 600.0)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise ConfigError(f"{where}: timeout_s must be a positive number of seconds")
        interval = table.get("progress_interval_s", 0.25)
        if not isinstance(interval, int | float) or isinstance(interval, bool) or interval < 0:
            raise ConfigError(f"{where}: progress_interval_s must be 0 or more seconds")
        card_url = url if url.endswith(CARD_SUFFIX) else url.rstrip("/") + CARD_SUFFIX
        out.append(
            RemoteAgentConfig(
                remote_id, card_url, token_env, description, float(timeout), float(interval)
            )
        )
    return out


def load_remote_agents(path: Path) -> list[RemoteAgentConfig]:
    """The remotes of the config file at ``path`` (none when the file does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err}") from err
    try:
        return parse_remote_agents(tomllib.loads(text))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: {err}") from err
