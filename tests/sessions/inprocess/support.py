"""Test kit of the in-process driver: a driver over scripted models, and an event reader.

Models are resolved from ``scripted:<profile>`` ids (``register_script`` profiles) or from a
dict of ready ``Model``s (pydantic-ai ``FunctionModel``s that record what they were sent).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from drupe.agent.models.script import Script, Sleep
from drupe.agent.models.scripted import register_script, scripted_model
from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk, UIMessage
from drupe.errors import ConfigError
from drupe.sessions.drivers.base import (
    ChunkEvent,
    ConnectInput,
    ErrorEvent,
    RuntimeEvent,
    SessionInfo,
    TurnComplete,
    UserInput,
)
from drupe.sessions.drivers.inprocess import InProcessConnection, InProcessDriver

_names = itertools.count()


def script_model(script: Script) -> str:
    """Register ``script`` under a fresh profile; return its model id."""
    name = f"inproc-{next(_names)}"
    register_script(name, script)
    return f"scripted:{name}"


def user(text: str, message_id: str = "u1") -> UIMessage:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def assistant(text: str, message_id: str) -> UIMessage:
    return {
        "id": message_id,
        "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": text, "state": "done"}],
    }


@dataclass
class Recorded:
    """A FunctionModel answering with fixed text and recording every request's messages."""

    text: str = "ok"
    seen: list[list[ModelMessage]] = field(default_factory=list)

    def model(self) -> FunctionModel:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
            self.seen.append(list(messages))
            yield self.text

        def unary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            raise AssertionError("the loop always streams")

        return FunctionModel(unary, stream_function=stream, model_name="recorded")


@dataclass
class Models:
    """``resolve_model``: ``scripted:`` ids, plus named ready models."""

    named: dict[str, Model] = field(default_factory=dict)
    sleep: Sleep | None = None
    """What a scripted ``Pause`` awaits (a test-controlled gate); None: real sleeps."""

    def __call__(self, model_id: str) -> Model:
        if model_id in self.named:
            return self.named[model_id]
        provider, _, spec = model_id.partition(":")
        if provider != "scripted":
            raise ConfigError(f"unknown model {model_id!r}")
        return scripted_model(spec, sleep=self.sleep)


@dataclass
class Gate:
    """A scripted ``Pause`` that waits for the test: ``reached`` when the model pauses."""

    reached: anyio.Event = field(default_factory=anyio.Event)
    released: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, seconds: float) -> None:
        self.reached.set()
        await self.released.wait()


@dataclass
class Histories:
    """``load_history``: what the store would return, and how often it was asked."""

    by_session: dict[str, list[UIMessage]] = field(default_factory=dict)
    loads: list[str] = field(default_factory=list)

    async def __call__(self, session_id: str) -> list[UIMessage]:
        self.loads.append(session_id)
        return list(self.by_session.get(session_id, []))


def session(workspace: Path, model_id: str, **kwargs: Any) -> SessionInfo:
    base: dict[str, Any] = {
        "session_id": "s1",
        "agent_id": "a1",
        "agent_name": "helper",
        "driver_type": "inprocess",
        "model_id": model_id,
        "workspace": workspace,
    }
    base.update(kwargs)
    return SessionInfo(**base)


class Reader:
    """The host's one reader of a connection's events, step by step."""

    def __init__(self, connection: InProcessConnection) -> None:
        self._events = connection.events()

    async def next(self) -> RuntimeEvent:
        return await self._events.__anext__()

    async def turn(self) -> list[RuntimeEvent]:
        """Every event up to and including the turn's terminal (turn-complete or error)."""
        out: list[RuntimeEvent] = []
        async for event in self._events:
            out.append(event)
            if isinstance(event, TurnComplete | ErrorEvent):
                return out
        raise AssertionError(f"the events ended without a terminal: {out!r}")

    async def rest(self) -> list[RuntimeEvent]:
        return [event async for event in self._events]


def chunks(events: Sequence[RuntimeEvent]) -> list[Chunk]:
    return [e.chunk for e in events if isinstance(e, ChunkEvent)]


def kinds(events: Sequence[RuntimeEvent]) -> list[str]:
    return [e.chunk["type"] if isinstance(e, ChunkEvent) else e.type for e in events]


def text_of(events: Sequence[RuntimeEvent]) -> str:
    message = accumulate(
        [{"type": "start", "messageId": "m"}, *chunks(events)],
    )
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")


def said(text: str, message_id: str = "u1", **kwargs: Any) -> UserInput:
    return UserInput(message=user(text, message_id), **kwargs)


@asynccontextmanager
async def driver_for(
    models: Models | None = None, histories: Histories | None = None, **kwargs: Any
) -> AsyncIterator[InProcessDriver]:
    async with InProcessDriver(
        resolve_model=models or Models(), load_history=histories or Histories(), **kwargs
    ) as driver:
        yield driver


async def connect(
    driver: InProcessDriver, info: SessionInfo, resume_token: str | None = None
) -> InProcessConnection:
    return await driver.connect(
        ConnectInput(session=info, model_id=info.model_id, resume_token=resume_token)
    )
