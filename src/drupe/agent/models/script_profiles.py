"""The ``scripted:<profile>[?k=v&...]`` profiles: named scripts and their parameters.

Owns: the profile registry (``register_script``, ``known_profiles``), ``ScriptParams`` (the
``?k=v`` parameters; every key must be read by the profile's factory), ``profile_script`` (a
spec resolved to its script and pacing), ``lorem`` and the built-in profiles (``echo``,
``lorem``, ``reasoning``, ``tool``, ``fail-first``, ``error``, ``error-mid``, ``slow``,
``docs/scripted-models.md``). ``drupe.agent.models.scripted.scripted_model`` builds the model.

Must never: do I/O; an unknown profile or parameter, or a value that does not parse, raises
``ConfigError`` naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias
from urllib.parse import parse_qsl

from drupe.agent.models.script import (
    Echo,
    Fail,
    FailMidStream,
    Script,
    Text,
    Thinking,
    ToolCall,
    validate_script,
)
from drupe.errors import ConfigError

__all__ = [
    "ProfileScript",
    "ScriptFactory",
    "ScriptParams",
    "known_profiles",
    "lorem",
    "profile_script",
    "register_script",
]


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


@dataclass(frozen=True, slots=True)
class ProfileScript:
    """A profile spec resolved: its script, pacing and context window."""

    name: str
    script: Script
    rate: float | None
    context_window: int | None


def profile_script(spec: str) -> ProfileScript:
    """Resolve ``profile[?k=v&...]``: ``rate`` and ``context_window`` are read for every
    profile, the rest by its factory; raises ``ConfigError`` for anything unknown."""
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
    return ProfileScript(name, script, rate, window)


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
