"""The scripted model's streamed response, and the provider errors a script raises.

Owns: ``ScriptedStreamedResponse`` (plays one planned step, ``drupe.agent.models.script.
plan_step``, through pydantic-ai's parts manager, pacing deltas at ``rate`` per second and
counting usage in words) and ``http_error`` (the ``ModelHTTPError`` of a scripted ``Fail``, with
the category and ``retry-after`` header a real provider's would carry).

Must never: do I/O other than the injected ``sleep``, or emit a delta after ``cancel()`` (the
stream raises its cancel error, which pydantic-ai swallows).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import assert_never

from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelServerError,
    ModelUnavailableError,
)
from pydantic_ai.messages import ModelResponseStreamEvent
from pydantic_ai.models import StreamedResponse
from pydantic_ai.usage import RequestUsage

from drupe.agent.models.script import FailMidStream, Pause, Planned, Sleep, count_words

__all__ = ["ScriptedStreamedResponse", "http_error"]


def http_error(
    status_code: int,
    model_name: str,
    body: str,
    retry_after: float | None,
    *,
    in_stream: bool = False,
) -> ModelHTTPError:
    """The error a provider answering ``status_code`` raises (429: rate limit, 502/503/504/529:
    unavailable, other 5xx: server error)."""
    category: type[ModelRateLimitError | ModelUnavailableError | ModelServerError] | None
    if status_code == 429:
        category = ModelRateLimitError
    elif status_code in (502, 503, 504, 529):
        category = ModelUnavailableError
    elif status_code >= 500:
        category = ModelServerError
    else:
        category = None
    headers = {"retry-after": _format_seconds(retry_after)} if retry_after is not None else None
    return ModelHTTPError.for_category(
        category,
        status_code=status_code,
        model_name=model_name,
        body={"error": {"message": body}},
        headers=headers,
        retry_after=retry_after,
        in_stream=in_stream,
    )


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


class _StreamCancelled(Exception):
    """Raised inside the stream after ``cancel()``; pydantic-ai swallows it as a cancel."""


@dataclass
class ScriptedStreamedResponse(StreamedResponse):
    """Streams one planned step through pydantic-ai's parts manager."""

    _model_name: str
    _plan: Iterator[Planned]
    """Consumed once, lazily (``plan_step``)."""
    _rate: float | None
    _sleep: Sleep
    _input_tokens: int
    _timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        self._usage = RequestUsage(input_tokens=self._input_tokens)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        interval = 1.0 / self._rate if self._rate else 0.0
        output_words = 0
        after_space = True
        delivered = 0
        called_tool = False
        for item in self._plan:
            if isinstance(item, Pause):
                await self._sleep(item.seconds)
                continue
            if isinstance(item, FailMidStream):
                raise _mid_stream_error(item, self._model_name)
            if interval and delivered:
                await self._sleep(interval)
            if self._cancelled:
                raise _StreamCancelled
            delivered += 1
            words, after_space = count_words(item.content, after_space)
            output_words += words
            self._usage = RequestUsage(input_tokens=self._input_tokens, output_tokens=output_words)
            match item.kind:
                case "text":
                    for event in self._parts_manager.handle_text_delta(
                        vendor_part_id=item.part, content=item.content
                    ):
                        yield event
                case "thinking":
                    for event in self._parts_manager.handle_thinking_delta(
                        vendor_part_id=item.part, content=item.content
                    ):
                        yield event
                case "tool":
                    called_tool = True
                    for event in self._parts_manager.handle_tool_call_delta_events(
                        vendor_part_id=item.part,
                        tool_name=item.tool_name,
                        args=item.content,
                        tool_call_id=item.tool_call_id,
                    ):
                        yield event
                case _:
                    assert_never(item.kind)
        self.finish_reason = "tool_call" if called_tool else "stop"

    async def close_stream(self) -> None:
        """Nothing to close: the script has no connection."""

    def get_stream_cancel_errors(self) -> tuple[type[BaseException], ...]:
        return (_StreamCancelled,)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider_name(self) -> str:
        return "scripted"

    @property
    def provider_url(self) -> None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


def _mid_stream_error(item: FailMidStream, model_name: str) -> Exception:
    if item.status_code is None:
        return ModelConnectionError(model_name, item.body, phase="read", in_stream=True)
    return http_error(item.status_code, model_name, item.body, None, in_stream=True)
