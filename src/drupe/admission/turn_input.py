"""The checks of what a turn is given, before anything is written: its message parts and its
models.

``check_parts`` refuses a user message with no parts, a part without a string ``type``, a text
part without a string ``text``, or a message with neither non-blank text nor a file; it returns
a clean copy. ``check_models`` resolves the models of a turn (none given: the default model),
refuses more than ``MAX_MODELS_PER_TURN``, a duplicate (``DuplicateModelError``) or one
``validate_model`` rejects. Every refusal is a ``ValidationError``; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from drupe.errors import DuplicateModelError, ValidationError

__all__ = ["MAX_MODELS_PER_TURN", "check_models", "check_parts"]

MAX_MODELS_PER_TURN: Final = 8


def check_parts(parts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validate the parts of a user message; returns a clean copy."""
    if not parts:
        raise ValidationError("the message has no parts")
    clean: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ValidationError("every message part needs a string 'type'")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise ValidationError("a text part needs a string 'text'")
        clean.append(dict(part))
    if not any(p["type"] == "text" and p["text"].strip() for p in clean) and not any(
        p["type"] == "file" for p in clean
    ):
        raise ValidationError("the message is empty")
    return clean


def check_models(
    model_ids: Sequence[str],
    default_model: Callable[[], str],
    validate_model: Callable[[str], None],
) -> list[str]:
    """The models of a turn, in order (none given: ``[default_model()]``), each validated."""
    models = list(model_ids) or [default_model()]
    if len(models) > MAX_MODELS_PER_TURN:
        raise ValidationError(f"at most {MAX_MODELS_PER_TURN} models per turn")
    seen: set[str] = set()
    for model_id in models:
        if model_id in seen:
            raise DuplicateModelError(model_id)
        seen.add(model_id)
        validate_model(model_id)
    return models
