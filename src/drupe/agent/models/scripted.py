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
register more with :func:`register_script`. This module must never do I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeAlias, assert_never
from urllib.parse import parse_qsl

import anyio
from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelServerError,
    ModelUnavailableError,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponseStreamEvent,
)
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from drupe.agent.models.script import (
    Delta,
    Echo,
    Event,
    Fail,
    FailMidStream,
    Pause,
    Planned,
    Script,
    Sleep,
    Step,
    Text,
    Thinking,
    ToolCall,
    count_words,
    plan_step,
    turn_step_index,
    validate_script,
    words_in_request,
)
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


def _http_error(
    status_code: int,
    model_name: str,
    body: str,
    retry_after: float | None,
    *,
    in_stream: bool = False,
) -> ModelHTTPError:
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


# --------------------------------------------------------------------------- the model


class _StreamCancelled(Exception):
    """Raised inside the stream after ``cancel()``; pydantic-ai swallows it as a cancel."""


@dataclass
class ScriptedStreamedResponse(StreamedResponse):
    """Streams one planned step through pydantic-ai's parts manager."""

    _model_name: str
    _plan: list[Planned]
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
                    for event in self._parts_manager.handle_tool_call_delta_events(
                        vendor_part_id=item.part,
                        tool_name=item.tool_name,
                        args=item.content,
                        tool_call_id=item.tool_call_id,
                    ):
                        yield event
                case _:
                    assert_never(item.kind)
        self.finish_reason = (
            "tool_call"
            if any(isinstance(i, Delta) and i.kind == "tool" for i in self._plan)
            else "stop"
        )

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
    return _http_error(item.status_code, model_name, item.body, None, in_stream=True)


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
                raise _http_error(
                    event.status_code, self._model_name, event.body, event.retry_after
                )
            if attempt is None:
                attempt = self._next_attempt(messages, step_index)
            if attempt < failed_before + event.times:
                raise _http_error(
                    event.status_code, self._model_name, event.body, event.retry_after
                )
            failed_before += event.times

    def _next_attempt(self, messages: Sequence[ModelMessage], step_index: int) -> int:
        digest = hashlib.sha256(ModelMessagesTypeAdapter.dump_json(list(messages))).hexdigest()
        key = f"{step_index}:{digest}"
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        return attempt


# --------------------------------------------------------------------------- profiles


class ScriptParams:
    """The ``?k=v`` parameters of a profile id; every key must be read by the factory."""

    def __init__(self, profile: str, raw: Mapping[str, str]) -> None:
        self._profile = profile
        self._raw = dict(raw)
        self._read: set[str] = set()

    def text(self, key: str, default: str) -> str:
        self._read.add(key)
        return self._raw.get(key, default)

    def integer(self, key: str, default: int) -> int:
        value = self.text(key, str(default))
        try:
            return int(value)
        except ValueError:
            raise ConfigError(
                f"scripted:{self._profile}: {key}={value!r} is not an integer"
            ) from None

    def number(self, key: str, default: float | None) -> float | None:
        self._read.add(key)
        if key not in self._raw:
            return default
        try:
            return float(self._raw[key])
        except ValueError:
            raise ConfigError(
                f"scripted:{self._profile}: {key}={self._raw[key]!r} is not a number"
            ) from None

    def unread(self) -> list[str]:
        return sorted(set(self._raw) - self._read)


ScriptFactory: TypeAlias = Callable[[ScriptParams], Script]


@dataclass(frozen=True, slots=True)
class _Profile:
    factory: ScriptFactory
    rate: float | None


_PROFILES: dict[str, _Profile] = {}

_LOREM_TEXT = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut "
    "labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco "
    "laboris nisi ut aliquip ex ea commodo consequat"
)
_LOREM = tuple(_LOREM_TEXT.split())


def lorem(words: int) -> str:
    """``words`` deterministic lorem-ipsum words, with a capital and a final full stop."""
    text = " ".join(_LOREM[i % len(_LOREM)] for i in range(max(words, 0)))
    return f"{text[:1].upper()}{text[1:]}." if text else ""


def register_script(
    name: str, script_or_factory: Script | ScriptFactory, *, rate: float | None = None
) -> None:
    """Register the profile ``scripted:<name>``: a fixed script, or a factory of parameters.

    ``rate`` is the profile's default pacing (a ``rate=`` parameter overrides it). Registering
    a name again replaces it.
    """
    if not name or any(c in name for c in ":?&="):
        raise ValueError(f"bad profile name {name!r}")
    if callable(script_or_factory):
        factory: ScriptFactory = script_or_factory
    else:
        fixed = validate_script(script_or_factory)

        def factory(params: ScriptParams) -> Script:
            return fixed

    _PROFILES[name] = _Profile(factory=factory, rate=rate)


def known_profiles() -> list[str]:
    """The registered profile names, sorted."""
    return sorted(_PROFILES)


def scripted_model(spec: str, *, sleep: Sleep | None = None) -> ScriptedModel:
    """Build the model for ``scripted:<spec>``, where spec is ``profile[?k=v&...]``.

    Every profile accepts ``rate`` (deltas per second) and ``context_window``. Raises
    :class:`~drupe.errors.ConfigError` for an unknown profile or parameter.
    """
    name, _, query = spec.partition("?")
    profile = _PROFILES.get(name)
    if profile is None:
        raise ConfigError(
            f"unknown scripted profile {name!r}; known profiles are {known_profiles()!r}"
        )
    params = ScriptParams(name, dict(parse_qsl(query, keep_blank_values=True)))
    rate = params.number("rate", profile.rate)
    window = params.integer("context_window", 0) or None
    script = profile.factory(params)
    if unread := params.unread():
        raise ConfigError(f"scripted:{name} does not take the parameters {unread!r}")
    try:
        return ScriptedModel(script, rate=rate, model_name=spec, context_window=window, sleep=sleep)
    except ValueError as err:
        raise ConfigError(f"scripted:{spec}: {err}") from err


def _lorem_script(params: ScriptParams) -> Script:
    return [[Text(lorem(params.integer("words", 50)))]]


def _reasoning_script(params: ScriptParams) -> Script:
    thought = "The user asked something. I will restate it, then answer briefly."
    return [[Thinking(params.text("thinking", thought)), Echo("Having thought about it: ")]]


def _tool_script(params: ScriptParams) -> Script:
    tool = params.text("tool", "get_weather")
    raw_args = params.text("args", '{"city": "Paris"}')
    try:
        args = json.loads(raw_args)
    except ValueError:
        raise ConfigError(f"scripted:tool: args={raw_args!r} is not JSON") from None
    return [
        [ToolCall(tool, args if isinstance(args, dict) else raw_args)],
        [Echo(f"The {tool} tool returned: ", source="tool-result")],
    ]


def _fail_first_script(params: ScriptParams) -> Script:
    times = params.integer("times", 2)
    status = params.integer("status", 429)
    retry_after = params.number("retry_after", 0.0)
    return [
        [
            Fail(status, body="scripted rate limit", retry_after=retry_after, times=times),
            Text(f"Recovered after {times} failed attempts."),
        ]
    ]


def _error_script(params: ScriptParams) -> Script:
    return [[Fail(params.integer("status", 500), body="scripted provider error")]]


def _error_mid_script(params: ScriptParams) -> Script:
    return [[Text(lorem(params.integer("words", 5))), FailMidStream(params.integer("status", 500))]]


def _slow_script(params: ScriptParams) -> Script:
    return [[Text(lorem(params.integer("words", 20)))]]


register_script("echo", [[Echo()]])
register_script("lorem", _lorem_script)
register_script("reasoning", _reasoning_script)
register_script("tool", _tool_script)
register_script("fail-first", _fail_first_script)
register_script("error", _error_script)
register_script("error-mid", _error_mid_script)
register_script("slow", _slow_script, rate=10.0)
