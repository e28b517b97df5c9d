"""The OpenAI Responses API dialect: UI chunks -> typed ``response.*`` events or one response.

Every wire shape is built from the ``openai`` package's own models
(``openai.types.responses``) and dumped as JSON; nothing here spells a field by hand that the
SDK defines. A stream is ``event: <type>`` + ``data: <json>`` frames, each with a strictly
increasing ``sequence_number``, in the documented order:

``response.created`` -> ``response.in_progress`` -> per output item: ``response.output_item.added``
-> (a message) ``response.content_part.added``, ``response.output_text.delta`` ...,
``response.output_text.done``, ``response.content_part.done`` | (a function call)
``response.function_call_arguments.delta`` ..., ``response.function_call_arguments.done`` |
(reasoning) ``response.reasoning_text.delta`` ..., ``response.reasoning_text.done`` ->
``response.output_item.done`` -> ``response.completed`` (or ``response.incomplete`` when the
model hit ``max_output_tokens``). A failure after the commit is an ``error`` event followed by
``response.failed`` (its ``response.error`` set). No ``[DONE]``: the Responses API has none.

Only calls of tools the client declared become ``function_call`` items. Pure: no I/O.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, Final

import orjson
from openai.types.responses import (
    FunctionTool,
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel

from drupe.chunks.types import Chunk
from drupe.gateway.openai_compat import openai_error_body
from drupe.gateway.prompt import GatewayFailure
from drupe.gateway.responses_input import ResponsesRequest
from drupe.gateway.responses_items import OutputItem, added_frames, done_frames, frame

__all__ = ["ResponsesDialect", "new_response_id"]

_ERROR_CODES: Final[Mapping[int, str]] = {429: "rate_limit_exceeded", 400: "invalid_prompt"}


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


class ResponsesDialect:
    """Folds UI chunks into Responses API events (streaming) or one response body."""

    def __init__(
        self, request: ResponsesRequest, *, response_id: str, model: str | None = None
    ) -> None:
        self.request = request
        self.model = model or request.model
        self.id = response_id
        self.created_at = time.time()
        self.items: list[OutputItem] = []
        self.open: dict[str, OutputItem] = {}
        """Open items by UI id (text/reasoning part id, tool call id)."""
        self.usage: Mapping[str, Any] = {}
        self.finish_reason = "stop"
        self.sequence = 0
        self._started = False
        self._settled: list[bytes] = []
        """Closing frames of items a ``body()`` call closed, for ``finish`` to send."""
        self._final: Response | None = None

    # --- the response object ------------------------------------------------------------------

    def response(self, status: str, *, error: GatewayFailure | None = None) -> Response:
        request = self.request
        incomplete = status == "incomplete"
        return Response(
            id=self.id,
            object="response",
            created_at=self.created_at,
            completed_at=time.time() if status in ("completed", "incomplete") else None,
            model=self.model,
            status=status,  # type: ignore[arg-type]
            output=[
                item.model(status="completed" if item.done else "in_progress")  # type: ignore[misc]
                for item in self.items
            ]
            if status != "in_progress"
            else [],
            instructions=request.instructions,
            metadata=request.metadata or {},
            temperature=request.temperature,
            max_output_tokens=request.max_output_tokens,
            parallel_tool_calls=request.parallel_tool_calls,
            previous_response_id=request.previous_response_id,
            tool_choice=request.tool_choice,  # type: ignore[arg-type]
            tools=[FunctionTool(**spec) for spec in request.tool_specs],
            usage=self._usage() if status != "in_progress" else None,
            error=(
                {"code": _ERROR_CODES.get(error.status, "server_error"), "message": error.message}  # type: ignore[arg-type]
                if error is not None
                else None
            ),
            incomplete_details={"reason": "max_output_tokens"} if incomplete else None,  # type: ignore[arg-type]
        )

    def _usage(self) -> ResponseUsage:
        source = self.usage
        prompt = int(source.get("inputTokens", 0) or 0)
        completion = int(source.get("outputTokens", 0) or 0)
        return ResponseUsage(
            input_tokens=prompt,
            input_tokens_details=InputTokensDetails(
                cached_tokens=int(source.get("cachedInputTokens") or 0), cache_write_tokens=0
            ),
            output_tokens=completion,
            output_tokens_details=OutputTokensDetails(
                reasoning_tokens=int(source.get("reasoningTokens") or 0)
            ),
            total_tokens=prompt + completion,
        )

    @property
    def status(self) -> str:
        return "incomplete" if self.finish_reason == "length" else "completed"

    # --- events -------------------------------------------------------------------------------

    def _seq(self) -> int:
        self.sequence += 1
        return self.sequence - 1

    def _opening(self) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        created = self.response("in_progress")
        return [
            frame(
                ResponseCreatedEvent(
                    type="response.created", response=created, sequence_number=self._seq()
                )
            ),
            frame(
                ResponseInProgressEvent(
                    type="response.in_progress", response=created, sequence_number=self._seq()
                )
            ),
        ]

    def _add(
        self, key: str, kind: str, prefix: str, *, call_id: str = "", name: str = ""
    ) -> tuple[OutputItem, list[bytes]]:
        item = OutputItem(
            kind,
            f"{prefix}_{uuid.uuid4().hex[:24]}",
            len(self.items),
            call_id=call_id,
            name=name,
        )
        self.items.append(item)
        self.open[key] = item
        return item, added_frames(item, self._seq)

    def _close(self, key: str) -> list[bytes]:
        item = self.open.pop(key, None)
        if item is None:
            return []
        return done_frames(item, self._seq)

    def _close_all(self, keep: str | None = None) -> list[bytes]:
        frames: list[bytes] = []
        for key in [k for k in self.open if k != keep]:
            frames.extend(self._close(key))
        return frames

    def feed(self, chunk: Chunk) -> list[bytes]:
        frames = self._opening()
        kind = chunk.get("type")
        if kind == "text-delta":
            frames.extend(self._text(chunk, "message", "msg"))
        elif kind == "reasoning-delta":
            frames.extend(self._text(chunk, "reasoning", "rs"))
        elif kind in ("text-end", "reasoning-end"):
            frames.extend(self._close(f"{kind.split('-')[0]}:{chunk.get('id', '')}"))
        elif kind == "tool-input-start":
            frames.extend(self._call_start(chunk))
        elif kind in ("tool-input-delta", "tool-input-available"):
            frames.extend(self._call_arguments(chunk))
        elif kind == "message-metadata":
            metadata = chunk.get("messageMetadata")
            usage = metadata.get("usage") if isinstance(metadata, dict) else None
            if isinstance(usage, dict):
                self.usage = usage
        elif kind == "finish":
            self.finish_reason = str(chunk.get("finishReason") or "stop")
            frames.extend(self._close_all())
        return frames

    def _text(self, chunk: Chunk, kind: str, prefix: str) -> list[bytes]:
        key = f"{'text' if kind == 'message' else 'reasoning'}:{chunk.get('id', '')}"
        delta = str(chunk.get("delta", ""))
        frames = self._close_all(keep=key)
        item = self.open.get(key)
        if item is None:
            item, added = self._add(key, kind, prefix)
            frames.extend(added)
        item.text.append(delta)
        if kind == "message":
            event: BaseModel = ResponseTextDeltaEvent(
                type="response.output_text.delta",
                delta=delta,
                logprobs=[],
                sequence_number=self._seq(),
                item_id=item.item_id,
                output_index=item.index,
                content_index=0,
            )
        else:
            event = ResponseReasoningTextDeltaEvent(
                type="response.reasoning_text.delta",
                delta=delta,
                sequence_number=self._seq(),
                item_id=item.item_id,
                output_index=item.index,
                content_index=0,
            )
        frames.append(frame(event))
        return frames

    def _call_start(self, chunk: Chunk) -> list[bytes]:
        name = str(chunk.get("toolName", ""))
        call_id = str(chunk.get("toolCallId", ""))
        key = f"call:{call_id}"
        if name not in self.request.declared_tools or key in self.open:
            return []
        frames = self._close_all()
        _, added = self._add(key, "function_call", "fc", call_id=call_id, name=name)
        return frames + added

    def _call_arguments(self, chunk: Chunk) -> list[bytes]:
        key = f"call:{chunk.get('toolCallId', '')}"
        item = self.open.get(key)
        if item is None:
            return []
        if chunk.get("type") == "tool-input-delta":
            piece = str(chunk.get("inputTextDelta", ""))
        elif not item.text:
            piece = orjson.dumps(chunk.get("input") or {}).decode()
        else:
            return self._close(key)
        frames: list[bytes] = []
        if piece:
            item.text.append(piece)
            frames.append(
                frame(
                    ResponseFunctionCallArgumentsDeltaEvent(
                        type="response.function_call_arguments.delta",
                        item_id=item.item_id,
                        output_index=item.index,
                        delta=piece,
                        sequence_number=self._seq(),
                    )
                )
            )
        if chunk.get("type") == "tool-input-available":
            frames.extend(self._close(key))
        return frames

    # --- terminals ----------------------------------------------------------------------------

    def _final_response(self) -> Response:
        """The finished response, built once (the stored body and ``response.completed``
        carry the same object); items still open are closed first."""
        if self._final is None:
            self._settled += self._opening() + self._close_all()
            self._final = self.response(self.status)
        return self._final

    def finish(self) -> list[bytes]:
        response = self._final_response()
        frames, self._settled = self._settled, []
        if response.status == "incomplete":
            event: BaseModel = ResponseIncompleteEvent(
                type="response.incomplete", response=response, sequence_number=self._seq()
            )
        else:
            event = ResponseCompletedEvent(
                type="response.completed", response=response, sequence_number=self._seq()
            )
        frames.append(frame(event))
        return frames

    def body(self) -> dict[str, Any]:
        # By alias: the wire's field names (``async``, never the SDK's Python name ``async_``).
        body: dict[str, Any] = self._final_response().model_dump(mode="json", by_alias=True)
        return body

    def error_body(self, failure: GatewayFailure) -> dict[str, Any]:
        return openai_error_body(failure)

    def error_frame(self, failure: GatewayFailure) -> bytes:
        code = openai_error_body(failure)["error"]["code"] or "server_error"
        error = ResponseErrorEvent(
            type="error",
            code=code,
            message=failure.message,
            param=None,
            sequence_number=self._seq(),
        )
        failed = ResponseFailedEvent(
            type="response.failed",
            response=self.response("failed", error=failure),
            sequence_number=self._seq(),
        )
        return frame(error) + frame(failed)
