"""Fixtures: a real stream manager, a real SQLite database and the real dispatcher."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from drupe.admission.base import TurnSpec
from drupe.admission.dispatch import Dispatcher
from drupe.admission.ephemeral import EphemeralProvider, EphemeralStore
from drupe.admission.persistent import PersistentProvider
from drupe.persistence.db import Database, open_database
from drupe.streaming.config import StreamConfig
from drupe.streaming.manager import StreamManager
from tests.streaming.sources import Source, text_chunks


@dataclass
class Runtime:
    db: Database
    manager: StreamManager
    dispatcher: Dispatcher
    ephemeral: EphemeralStore
    sources: dict[str, list[Source]] = field(default_factory=dict)
    specs: list[TurnSpec] = field(default_factory=list)

    def script(self, model_id: str, source: Source) -> Source:
        """Queue ``source`` as the next execution of ``model_id``."""
        self.sources.setdefault(model_id, []).append(source)
        return source

    def runner(self, spec: TurnSpec) -> AsyncIterator[dict[str, Any]]:
        self.specs.append(spec)
        queue = self.sources.get(spec.model_id)
        if queue:
            return queue.pop(0)()
        return Source(text_chunks(spec.message_id, ["fine", " thanks"]))()


@pytest.fixture
def stream_config() -> StreamConfig:
    return StreamConfig(grace_period=30.0)


@pytest.fixture
async def runtime(tmp_path: Path, stream_config: StreamConfig) -> AsyncIterator[Runtime]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'drupe.db'}"
    async with open_database(url) as db, StreamManager(stream_config) as manager:
        ephemeral = EphemeralStore()
        holder: dict[str, Runtime] = {}

        def run(spec: TurnSpec) -> AsyncIterator[dict[str, Any]]:
            return holder["rt"].runner(spec)

        persistent = PersistentProvider(
            conversations=db.conversations,
            messages=db.messages,
            runner=run,
            default_model=lambda: "scripted:default",
            validate_model=_validate,
            has_pending_steer=manager.has_pending_steer,
        )
        dispatcher = Dispatcher(
            manager,
            [
                EphemeralProvider(ephemeral, runner=run, default_model=lambda: "scripted:default"),
                persistent,
            ],
            reconciled=_set_event(),
        )
        rt = Runtime(db=db, manager=manager, dispatcher=dispatcher, ephemeral=ephemeral)
        holder["rt"] = rt
        yield rt
        with anyio.fail_after(5):
            await manager.shutdown()


def _validate(model_id: str) -> None:
    from drupe.errors import ValidationError

    if ":" not in model_id:
        raise ValidationError(f"unknown model {model_id!r}")


def _set_event() -> anyio.Event:
    event = anyio.Event()
    event.set()
    return event
