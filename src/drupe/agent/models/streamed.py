"""``StreamOnlyModel``: a pydantic-ai ``Model`` whose plain request is its streamed request.

Drupe's own models (the bundled local model, the scripted test model) only implement
``request_stream``; ``request`` drains that stream and returns the final response, so both paths
produce the same message by construction.
"""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings

__all__ = ["StreamOnlyModel"]


class StreamOnlyModel(Model):
    """Base for models that implement ``request_stream`` only."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        async with self.request_stream(
            messages, model_settings, model_request_parameters
        ) as stream:
            async for _event in stream:
                pass
        return stream.get()
