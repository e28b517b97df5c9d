"""One model request of a step: streamed as UI chunks, retried before its first chunk.

Owns: ``stream_request`` (the step's ``start-step`` and content chunks for one
``pydantic_ai.direct.model_request_stream`` call), ``request_parameters`` (the tool definitions
and instructions of a request) and ``as_provider_error``. ``drupe.agent.loop`` calls it once per
step; importing this module imports pydantic-ai.

Contract:
- ``start-step`` comes out exactly once: before the first content chunk, or before the
  ``StepChunker``'s tail when the response had no content.
- A failure before the first chunk is tried again while the request's ``RetryPolicy`` allows
  (``drupe.agent.retry``), each wait announced by a transient ``data-retry`` chunk and slept
  through ``runner.sleep``; a later or final failure raises ``ProviderError`` chained to the
  original error (a ``DrupeError`` or a non-model error propagates unchanged).
- The completed ``ModelResponse`` is appended to ``out`` only once the stream has ended.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import Any, cast

from pydantic_ai.direct import model_request_stream
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from drupe.agent.chunker import StepChunker
from drupe.agent.retry import FailureInfo, classify, retry_chunk
from drupe.agent.retry_policy import RetryPolicy
from drupe.agent.runner import AgentRunner
from drupe.chunks.types import Chunk
from drupe.errors import DrupeError, ProviderError
from drupe.tools.base import ToolEntry

__all__ = ["as_provider_error", "request_parameters", "stream_request"]

logger = logging.getLogger(__name__)


async def stream_request(
    model: Model,
    messages: list[ModelMessage],
    settings: Mapping[str, Any] | None,
    params: ModelRequestParameters,
    chunker: StepChunker,
    out: list[ModelResponse],
    *,
    runner: AgentRunner,
    policy: RetryPolicy,
    where: tuple[str, int],
) -> AsyncGenerator[Chunk, None]:
    """Stream one model request, retrying before its first chunk; emits ``start-step``.

    ``where``: the conversation id and step number, for the retry log line."""
    attempt = 1
    started = False
    while True:
        try:
            async with model_request_stream(
                model,
                messages,
                model_settings=cast(ModelSettings | None, settings),
                model_request_parameters=params,
                instrument=False,
            ) as response_stream:
                async for event in response_stream:
                    chunks = chunker.feed(event)
                    if chunks and not started:
                        started = True
                        yield {"type": "start-step"}
                    for chunk in chunks:
                        yield chunk
                response = response_stream.get()
            break
        except Exception as error:
            info = classify(error, now=runner.now())
            delay = None if started else policy.delay_for(attempt, info)
            if delay is None:
                wrapped = as_provider_error(error, info, started=started)
                if wrapped is error:
                    raise
                raise wrapped from error
            attempt += 1
            logger.warning(
                "model request failed (conversation %r, step %d, status %s); try %d/%d in %.3fs",
                *where,
                info.status_code,
                attempt,
                policy.attempts,
                delay,
            )
            yield retry_chunk(next_attempt=attempt, policy=policy, delay=delay, info=info)
            await runner.sleep(delay)
    tail = chunker.finish(response)
    if not started:
        yield {"type": "start-step"}
    for chunk in tail:
        yield chunk
    out.append(response)


def request_parameters(tools: Iterable[ToolEntry], system: str | None) -> ModelRequestParameters:
    """The function tools and the instructions (``system``) of one model request."""
    return ModelRequestParameters(
        function_tools=[
            ToolDefinition(
                name=entry.name,
                description=entry.description,
                parameters_json_schema=dict(entry.input_schema),
            )
            for entry in tools
        ],
        allow_text_output=True,
        instruction_parts=[InstructionPart(content=system)] if system else None,
    )


def as_provider_error(error: Exception, info: FailureInfo, *, started: bool) -> Exception:
    """Wrap model/transport failures in ``ProviderError``; return anything else unchanged."""
    if isinstance(error, DrupeError):
        return error
    if isinstance(error, AgentRunError) or info.retryable or info.status_code is not None:
        where = " after the step had started streaming" if started else ""
        return ProviderError(
            f"model request failed{where}: {info.message}",
            status_code=info.status_code,
            retryable=info.retryable,
        )
    return error
