"""Chat commands: detection and their fixed texts (run by ``drupe.channels.chat_worker``).

A message is a command when it matches ``^/(name)(@bot)?\\b`` for a known name. ``/help``,
``/whoami``, ``/status``, ``/link``, ``/unlink`` and ``/stop`` act at once (``/stop`` also drops
a pending burst);
``/new``, ``/compact`` and ``/model`` first release any pending burst, so earlier messages are
answered before the chat moves on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["COMMANDS", "Command", "help_text", "parse_command", "refusal_text", "whoami_text"]

COMMANDS: Final = {
    "new": "Start a new conversation",
    "stop": "Stop the current answer",
    "compact": "Compact the conversation history",
    "model": "Show or switch the model (/model <id>)",
    "status": "Show this chat's state",
    "help": "Show the commands",
    "whoami": "Show your user and chat ids",
    "link": "Act as your Drupe user (/link <code> from Drupe's Settings)",
    "unlink": "Stop acting as your linked Drupe user",
}
IMMEDIATE: Final = frozenset({"help", "whoami", "status", "stop", "link", "unlink"})
_PATTERN: Final = re.compile(r"^/([a-z]+)(?:@[\w.]+)?(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str = ""

    @property
    def immediate(self) -> bool:
        return self.name in IMMEDIATE


def parse_command(text: str) -> Command | None:
    match = _PATTERN.match(text.strip())
    if match is None or match.group(1) not in COMMANDS:
        return None
    return Command(match.group(1), (match.group(2) or "").strip())


def help_text(channel_id: str) -> str:
    lines = [f"*Drupe* ({channel_id})", "", "Available commands:"]
    lines += [f"/{name} - {description}" for name, description in COMMANDS.items()]
    lines += ["", "Send a message while an answer streams to steer it."]
    return "\n".join(lines)


def whoami_text(channel_id: str, user_id: str, chat_id: str, acts_as: str | None = None) -> str:
    acting = f"Drupe user: `{acts_as}`\n" if acts_as else ""
    return (
        f"Your user ID: `{user_id}`\nCurrent chat ID: `{chat_id}`\n{acting}\n"
        f"Add one of them to `allowed_users` / `allowed_chats` of [channels.{channel_id}] "
        "in config.toml to talk to this bot."
    )


def refusal_text(channel_id: str, user_id: str, chat_id: str) -> str:
    return (
        "This bot does not know you yet.\n" + whoami_text(channel_id, user_id, chat_id) + "\n"
        "Then restart Drupe (or ask its owner to)."
    )
