"""A schedule's fields checked before anything is written, and trigger equality.

Contract: ``checked`` returns the normalized values (the name stripped, the delivery targets
parsed) or raises one ``ValidationError`` naming the first bad field and its accepted values:
name 1-``MAX_NAME_CHARS`` characters, prompt 1-``MAX_PROMPT_CHARS``, timeout 0 (none) to
``MAX_TIMEOUT_MINUTES``, session mode ``fresh``/``sticky``, missed policy ``skip``/``run-once``.
``same_trigger`` compares two triggers ignoring an interval's anchor. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from drupe.errors import ValidationError
from drupe.persistence.schedule_records import deliver_targets
from drupe.tasks.triggers import IntervalTrigger, Trigger

__all__ = [
    "DEFAULT_TIMEOUT_MINUTES",
    "MAX_NAME_CHARS",
    "MAX_PROMPT_CHARS",
    "MAX_TIMEOUT_MINUTES",
    "checked",
    "same_trigger",
]

DEFAULT_TIMEOUT_MINUTES: Final = 2
MAX_TIMEOUT_MINUTES: Final = 24 * 60
MAX_NAME_CHARS: Final = 200
MAX_PROMPT_CHARS: Final = 100_000


def checked(
    *,
    name: str,
    prompt: str,
    timeout_minutes: int,
    session_mode: str,
    missed_policy: str,
    deliver_to: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise ValidationError(f"name must be 1-{MAX_NAME_CHARS} characters")
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
        raise ValidationError(f"prompt must be 1-{MAX_PROMPT_CHARS} characters")
    if not isinstance(timeout_minutes, int) or not 0 <= timeout_minutes <= MAX_TIMEOUT_MINUTES:
        raise ValidationError(f"timeout_minutes must be 0 (none) to {MAX_TIMEOUT_MINUTES}")
    if session_mode not in ("fresh", "sticky"):
        raise ValidationError("session_mode must be 'fresh' or 'sticky'")
    if missed_policy not in ("skip", "run-once"):
        raise ValidationError("missed_policy must be 'skip' or 'run-once'")
    return {
        "name": name.strip(),
        "prompt": prompt,
        "timeout_minutes": timeout_minutes,
        "session_mode": session_mode,
        "missed_policy": missed_policy,
        "deliver_to": deliver_targets(deliver_to),
    }


def same_trigger(a: Trigger, b: Trigger) -> bool:
    """Equal triggers (an interval's anchor does not count)."""
    if isinstance(a, IntervalTrigger) and isinstance(b, IntervalTrigger):
        return a.seconds == b.seconds
    return a == b
