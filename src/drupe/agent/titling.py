"""One short model call that names a conversation from its first exchange.

``model_title(model, user_text, answer_text)`` asks ``model`` (any pydantic-ai model: a
provider's, the local one, a scripted one) for a title of a few words and returns its text, or
``None`` when the model wrote nothing usable. The exchange is cut to ``MAX_EXCERPT_CHARS``
characters a side and the answer to ``MAX_TITLE_TOKENS`` tokens, so the call stays short and
cheap whatever was said. It raises what the model raises (the caller decides what a failure
means, and bounds the time).

``clean_title(text)`` is the pure rule applied to the model's text: the first non-empty line,
without a ``Title:`` prefix, surrounding quotes, markdown markers or a final full stop.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model

__all__ = ["MAX_EXCERPT_CHARS", "MAX_TITLE_TOKENS", "clean_title", "model_title", "title_prompt"]

MAX_EXCERPT_CHARS: Final = 2000
MAX_TITLE_TOKENS: Final = 32
_PREFIX = re.compile(r"^\s*(title\s*:\s*)", re.IGNORECASE)
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb*_#"


def title_prompt(user_text: str, answer_text: str) -> str:
    """The request: the instruction, then the exchange (each side cut to the excerpt limit)."""
    return (
        "Write a title of at most six words for the conversation below. Answer with the title "
        "only: no quotes, no full stop.\n\n"
        f"User: {user_text[:MAX_EXCERPT_CHARS]}\n\n"
        f"Assistant: {answer_text[:MAX_EXCERPT_CHARS]}"
    )


def clean_title(text: str) -> str | None:
    """The title in a model's answer, or ``None`` if it holds no words."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = _PREFIX.sub("", line).strip().strip(_QUOTES).strip()
    line = line.rstrip(".").strip().strip(_QUOTES).strip()
    return line or None


async def model_title(model: Model, user_text: str, answer_text: str) -> str | None:
    """Ask ``model`` for a title of the exchange; its cleaned text, or ``None``."""
    # The model layer loads on first use, not at boot (tests/test_boot_imports.py).
    from pydantic_ai.direct import model_request_stream
    from pydantic_ai.messages import ModelRequest, TextPart

    messages: list[ModelMessage] = [
        ModelRequest.user_text_prompt(title_prompt(user_text, answer_text))
    ]
    async with model_request_stream(
        model, messages, model_settings={"max_tokens": MAX_TITLE_TOKENS}
    ) as stream:
        async for _event in stream:
            pass
        response = stream.get()
    text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
    return clean_title(text)
