"""One output item of a Responses API answer while it is built, and the frames of its lifecycle.

Contract: ``OutputItem`` is a message, a function call or a reasoning item, with its
``openai.types.responses`` model at a given status. ``added_frames`` are the frames that open an
item (``response.output_item.added``, and for a message ``response.content_part.added``);
``done_frames`` close it (``response.output_text.done`` + ``response.content_part.done``, or
``response.function_call_arguments.done``, or ``response.reasoning_text.done``; then
``response.output_item.done``). Each frame takes the next number of the caller's ``seq``. A
frame is ``event: <type>`` + ``data: <json>`` built from the SDK's models. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from openai.types.responses import (
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseReasoningTextDoneEvent,
    ResponseTextDoneEvent,
)
from openai.types.responses.response_reasoning_item import Content as ReasoningContent
from pydantic import BaseModel

__all__ = ["OutputItem", "added_frames", "done_frames", "frame"]


@dataclass(slots=True)
class OutputItem:
    """One output item being built: a message, a function call or a reasoning item."""

    kind: str
    item_id: str
    index: int
    text: list[str] = field(default_factory=list)
    call_id: str = ""
    name: str = ""
    done: bool = False

    def model(self, *, status: str) -> BaseModel:
        if self.kind == "message":
            content = (
                [ResponseOutputText(type="output_text", text="".join(self.text), annotations=[])]
                if self.done
                else []
            )
            return ResponseOutputMessage(
                id=self.item_id,
                type="message",
                role="assistant",
                status=status,  # type: ignore[arg-type]
                content=content,  # type: ignore[arg-type]
            )
        if self.kind == "function_call":
            return ResponseFunctionToolCall(
                id=self.item_id,
                type="function_call",
                call_id=self.call_id,
                name=self.name,
                arguments="".join(self.text),
                status=status,  # type: ignore[arg-type]
            )
        text = "".join(self.text)
        return ResponseReasoningItem(
            id=self.item_id,
            type="reasoning",
            summary=[],
            content=[ReasoningContent(type="reasoning_text", text=text)] if self.done else [],
            status=status,  # type: ignore[arg-type]
        )


def frame(event: BaseModel) -> bytes:
    """One SSE frame: ``event: <type>`` and the event's JSON (``None`` fields left out)."""
    data: dict[str, Any] = event.model_dump(mode="json", exclude_none=True)
    kind = str(data["type"]).encode()
    return b"event: " + kind + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def added_frames(item: OutputItem, seq: Callable[[], int]) -> list[bytes]:
    """The frames that open ``item`` (``seq()`` numbers each, in order)."""
    frames = [
        frame(
            ResponseOutputItemAddedEvent(
                type="response.output_item.added",
                item=item.model(status="in_progress"),  # type: ignore[arg-type]
                output_index=item.index,
                sequence_number=seq(),
            )
        )
    ]
    if item.kind == "message":
        frames.append(
            frame(
                ResponseContentPartAddedEvent(
                    type="response.content_part.added",
                    item_id=item.item_id,
                    output_index=item.index,
                    content_index=0,
                    part=ResponseOutputText(type="output_text", text="", annotations=[]),
                    sequence_number=seq(),
                )
            )
        )
    return frames


def done_frames(item: OutputItem, seq: Callable[[], int]) -> list[bytes]:
    """The frames that close ``item`` (its final text, then ``output_item.done``); marks it
    done, and gives a function call without arguments ``{}``."""
    item.done = True
    text = "".join(item.text)
    item_id, index = item.item_id, item.index
    frames: list[bytes] = []
    if item.kind == "message":
        frames.append(
            frame(
                ResponseTextDoneEvent(
                    type="response.output_text.done",
                    content_index=0,
                    text=text,
                    logprobs=[],
                    sequence_number=seq(),
                    item_id=item_id,
                    output_index=index,
                )
            )
        )
        frames.append(
            frame(
                ResponseContentPartDoneEvent(
                    type="response.content_part.done",
                    content_index=0,
                    part=ResponseOutputText(type="output_text", text=text, annotations=[]),
                    sequence_number=seq(),
                    item_id=item_id,
                    output_index=index,
                )
            )
        )
    elif item.kind == "function_call":
        frames.append(
            frame(
                ResponseFunctionCallArgumentsDoneEvent(
                    type="response.function_call_arguments.done",
                    arguments=text or "{}",
                    sequence_number=seq(),
                    item_id=item_id,
                    output_index=index,
                )
            )
        )
        if not text:
            item.text.append("{}")
    else:
        frames.append(
            frame(
                ResponseReasoningTextDoneEvent(
                    type="response.reasoning_text.done",
                    content_index=0,
                    text=text,
                    sequence_number=seq(),
                    item_id=item_id,
                    output_index=index,
                )
            )
        )
    frames.append(
        frame(
            ResponseOutputItemDoneEvent(
                type="response.output_item.done",
                item=item.model(status="completed"),  # type: ignore[arg-type]
                output_index=item.index,
                sequence_number=seq(),
            )
        )
    )
    return frames
