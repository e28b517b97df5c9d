"""The scripted model: a deterministic pydantic-ai ``Model`` for tests, benchmarks and demos.

Owns :class:`ScriptedModel` and the ``scripted:<profile>`` profiles. A *script* is a list of
*steps*; one model request is one step. A step is a list of events (:class:`Text`,
:class:`Thinking`, :class:`ToolCall`, :class:`Echo`, :class:`Fail`, :class:`FailMidStream`,
:class:`Pause`), all plain frozen data defined in :mod:`drupe.agent.models.script` and re-exported
here. The model is a real ``pydantic_ai.models.Model`` subclass, so the agent
loop drives it through exactly the code path a provider takes (``request_stream`` yielding a
``StreamedResponse`` whose events come from pydantic-ai's parts manager).

Determinism rules:

- The step of a request is the number of model responses since the last user prompt in the
  messages (a new user message starts again at step 0; a tool result moves to the next step).
  Past the end of the script, the last step repeats.
- A :class:`Fail` with ``times=N`` fails the first N attempts at the same request (same
  messages), then lets the step run; this is the only state the model keeps.
- Text is split into one delta per word (the word plus the whitespace after it), or into
  ``chunk_chars`` slices. Usage is counted in words: input = words sent, output = words made.
- With ``rate`` (events per second) the model sleeps ``1/rate`` before every delta after the
  first; without it, it never sleeps except for :class:`Pause`.

Profiles (``scripted:<profile>[?k=v&...]`` model ids) are resolved by :func:`scripted_model`;
register more with :func:`register_script` (the registry and the built-in profiles are
:mod:`drupe.agent.models.script_profiles`; the streamed response and the provider errors,
:mod:`drupe.agent.models.scripted_response`; both re-exported here where callers use them).
This module must never do I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from drupe.agent.models.script import (
    Echo,
    Event,
    Fail,
    FailMidStream,
    Pause,
    Script,
    Sleep,
    Step,
    Text,
    Thinking,
    ToolCall,
    plan_step,
    turn_step_index,
    validate_script,
    words_in_request,
)
from drupe.agent.models.script_profiles import (
    ScriptFactory,
    ScriptParams,
    known_profiles,
    lorem,
    profile_script,
    register_script,
)
from drupe.agent.models.scripted_response import ScriptedStreamedResponse, http_error
from drupe.agent.models.streamed import StreamOnlyModel
from drupe.errors import ConfigError

__all__ = [
    "Echo",
    "Event",
    "Fail",
    "FailMidStream",
    "Pause",
    "Script",
    "ScriptFactory",
    "ScriptParams",
    "ScriptedModel",
    "Step",
    "Text",
    "Thinking",
    "ToolCall",
    "known_profiles",
    "lorem",
    "register_script",
    "scripted_model",
    "turn_step_index",
]


class ScriptedModel(StreamOnlyModel):
    """A deterministic model that plays a script; one request is one step.

    ``rate`` is deltas per second (``None`` or ``0``: as fast as possible). ``sleep`` is the
    clock seam used for pacing and :class:`Pause` (``anyio.sleep`` unless a test pins it).
    """

    _announces_lookalike_notes = False

    def __init__(
        self,
        script: Script,
        *,
        rate: float | None = None,
        model_name: str = "scripted",
        context_window: int | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        if rate is not None and rate < 0:
            raise ValueError("rate must be >= 0")
        self._script = validate_script(script)
        self._rate = rate or None
        self._model_name = model_name
        self._sleep: Sleep = sleep or anyio.sleep
        self._attempts: dict[str, int] = {}
        profile = ModelProfile(supports_json_schema_output=True, supports_json_object_output=True)
        if context_window is not None:
            profile["context_window"] = context_window
        super().__init__(profile=profile)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def system(self) -> str:
        return "scripted"

    @property
    def rate(self) -> float | None:
        return self._rate

    async def count_tokens(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> RequestUsage:
        """Exactly the input usage a request with ``messages`` reports (its words)."""
        return RequestUsage(input_tokens=words_in_request(messages))

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
        step_index = turn_step_index(messages)
        step = self._script[min(step_index, len(self._script) - 1)]
        await self._open(step, messages, step_index)
        yield ScriptedStreamedResponse(
            model_request_parameters=model_request_parameters,
            _model_name=self._model_name,
            _plan=plan_step(step, messages, step_index),
            _rate=self._rate,
            _sleep=self._sleep,
            _input_tokens=words_in_request(messages),
        )

    async def _open(
        self, step: tuple[Event, ...], messages: Sequence[ModelMessage], step_index: int
    ) -> None:
        """Run the step's leading pauses and failures: the "error before the first chunk"."""
        attempt: int | None = None
        failed_before = 0
        for event in step:
            if isinstance(event, Pause):
                await self._sleep(event.seconds)
                continue
            if not isinstance(event, Fail):
                return
            if event.times is None:
                raise http_error(event.status_code, self._model_name, event.body, event.retry_after)
            if attempt is None:
                attempt = self._next_attempt(messages, step_index)
            if attempt < failed_before + event.times:
                raise http_error(event.status_code, self._model_name, event.body, event.retry_after)
            failed_before += event.times

    def _next_attempt(self, messages: Sequence[ModelMessage], step_index: int) -> int:
        digest = hashlib.sha256(ModelMessagesTypeAdapter.dump_json(list(messages))).hexdigest()
        key = f"{step_index}:{digest}"
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        return attempt


def scripted_model(spec: str, *, sleep: Sleep | None = None) -> ScriptedModel:
    """Build the model for ``scripted:<spec>``, where spec is ``profile[?k=v&...]``.

    Every profile accepts ``rate`` (deltas per second) and ``context_window``. Raises
    :class:`~drupe.errors.ConfigError` for an unknown profile or parameter.
    """
    resolved = profile_script(spec)
    try:
        return ScriptedModel(
            resolved.script,
            rate=resolved.rate,
            model_name=spec,
            context_window=resolved.context_window,
            sleep=sleep,
        )
    except ValueError as err:
        raise ConfigError(f"scripted:{spec}: {err}") from err
