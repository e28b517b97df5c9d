"""What the Claude Code CLI is given and gives back, as plain values (pure).

* ``user_content``: a UI user message -> Anthropic content blocks (text; a steer's text wrapped
  in a ``<system-reminder>``; images given as base64 data URLs; other files named in text);
* ``tool_output``: a tool result's content -> the UI tool output (text blocks joined);
* ``sdk_permission_mode``: Drupe's permission mode name -> the SDK's.

Must never: do I/O.
"""

from __future__ import annotations

from typing import Any

from drupe.sessions.drivers.base import UserInput
from drupe.sessions.drivers.claude_code.steer import steer_reminder, user_text

__all__ = ["sdk_permission_mode", "tool_output", "user_content"]

_PERMISSION_MODES = {
    "default": "default",
    "accept-edits": "acceptEdits",
    "plan": "plan",
    "bypass": "bypassPermissions",
}


def sdk_permission_mode(mode: str) -> Any:
    """Drupe's permission mode name -> the SDK's."""
    return _PERMISSION_MODES.get(mode, "default")


def user_content(user_input: UserInput) -> list[dict[str, Any]]:
    """The Anthropic content blocks of a user input (text; images given as data URLs)."""
    blocks: list[dict[str, Any]] = []
    for part in user_input.message.get("parts", []):
        ptype = part.get("type")
        if ptype == "text":
            text = str(part.get("text", ""))
            if user_input.system_reminder:
                text = f"<system-reminder>\n{steer_reminder(text)}\n</system-reminder>"
            blocks.append({"type": "text", "text": text})
        elif ptype == "file":
            url = str(part.get("url", ""))
            media = str(part.get("mediaType", ""))
            if media.startswith("image/") and url.startswith("data:") and ";base64," in url:
                data = url.split(";base64,", 1)[1]
                source = {"type": "base64", "media_type": media, "data": data}
                blocks.append({"type": "image", "source": source})
            else:
                name = part.get("filename") or url
                blocks.append({"type": "text", "text": f"[attached file: {name}]"})
    if not blocks:
        blocks.append({"type": "text", "text": user_text(user_input)})
    return blocks


def tool_output(content: str | list[dict[str, Any]] | None) -> Any:
    """A tool result's content as a UI output: text blocks joined, other lists kept as JSON."""
    if content is None or isinstance(content, str):
        return content if content is not None else ""
    if all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "".join(str(b.get("text", "")) for b in content)
    return content
