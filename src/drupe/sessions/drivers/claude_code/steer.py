"""The steer holder: steers waiting for the Claude Code ``PreToolUse`` hook, and the boundary.

Owns one connection's steering state (reference §6.4-§6.5), as a synchronous state machine:

* ``offer`` stashes a steer while a turn is active and the message is text-only (else False:
  the host queues it as the next turn);
* ``inject`` (called by the ``PreToolUse`` hook of a top-level tool call) takes every pending
  steer, returns the text to hand the model as ``additionalContext``, and ARMS the boundary;
* ``take_boundary`` (called at the first top-level ``message_start`` afterwards) returns the
  injected steers once, disarming: the driver emits ``steer-boundary`` before that message;
* ``end_turn`` returns the steers never injected (``steer-undelivered``); a boundary still armed
  is dropped (no empty continuation row).

Must never: do I/O, or hand the same steer out twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drupe.sessions.drivers.base import UserInput

__all__ = ["SteerHolder", "is_text_only", "steer_reminder", "user_text"]

_STEER_PREAMBLE = "The user sent a new message while you were working:"
_STEER_TAIL = (
    "IMPORTANT: After completing your current task, you MUST address the user's message "
    "above. Do not ignore it."
)


def user_text(user_input: UserInput) -> str:
    """The text parts of the input's message, joined."""
    parts = user_input.message.get("parts", [])
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def is_text_only(user_input: UserInput) -> bool:
    """Whether every part is text (steers through a hook can only carry text)."""
    parts = user_input.message.get("parts", [])
    return bool(parts) and all(p.get("type") == "text" for p in parts)


def steer_reminder(text: str) -> str:
    """Wrap a steer's text the way a message sent while the agent worked reads to the model."""
    return f"{_STEER_PREAMBLE}\n{text}\n\n{_STEER_TAIL}"


@dataclass(slots=True)
class SteerHolder:
    """Pending and injected steers of the running turn (one per connection)."""

    turn_active: bool = False
    pending: list[UserInput] = field(default_factory=list)
    armed: list[UserInput] = field(default_factory=list)

    def begin_turn(self) -> None:
        self.turn_active = True
        self.pending.clear()
        self.armed.clear()

    def offer(self, user_input: UserInput) -> bool:
        """Stash ``user_input`` for the next hook; False when it cannot be folded in now."""
        if not self.turn_active or not is_text_only(user_input):
            return False
        self.pending.append(user_input)
        return True

    def inject(self) -> str | None:
        """Take the pending steers for injection (arms the boundary); None when there are none."""
        if not self.turn_active or not self.pending:
            return None
        taken, self.pending = self.pending, []
        self.armed.extend(taken)
        return "\n\n".join(steer_reminder(user_text(s)) for s in taken)

    def take_boundary(self) -> tuple[UserInput, ...]:
        """The injected steers, once (disarms); empty when nothing is armed."""
        taken, self.armed = tuple(self.armed), []
        return taken

    def end_turn(self) -> tuple[UserInput, ...]:
        """End the turn: return the steers never injected; drop an armed boundary."""
        undelivered = tuple(self.pending)
        self.pending.clear()
        self.armed.clear()
        self.turn_active = False
        return undelivered

    async def pre_tool_use_hook(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """The SDK ``PreToolUse`` hook: inject pending steers as a system reminder.

        Subagent tool calls (``agent_id`` set) are left alone: their context is not the main
        conversation's, so a steer injected there would never reach the model that answers.
        """
        if hook_input.get("agent_id"):
            return {}
        text = self.inject()
        if text is None:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": text}}
