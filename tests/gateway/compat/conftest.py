"""Fixtures: Drupe's full HTTP app over a real runtime, served by a real uvicorn on loopback.

``open_gateway`` opens a runtime (SQLite in ``tmp_path``, scripted models), creates one API key
and serves ``create_app(runtime)``; tests talk to it with the official ``openai`` and
``anthropic`` clients (retries off). The scripted profiles registered here stall on purpose,
for scenario 40, or fail like an upstream that is down.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anthropic
import openai
import pytest

from drupe.agent.models.scripted import Fail, Pause, Text, register_script
from drupe.api.app_factory import create_app
from drupe.app import Runtime, open_runtime
from drupe.settings import AuthSettings, Settings
from drupe.testing.loopback import serve_app

register_script("gw-stall-mid", [[Text("partial answer "), Pause(120), Text("never sent")]])
register_script("gw-stall-start", [[Pause(120), Text("never sent")]])
register_script("gw-upstream-down", [[Fail(502, body="upstream is down", retry_after=0)]])

WEATHER_OPENAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WEATHER_ANTHROPIC = {
    "name": "get_weather",
    "description": "Current weather of a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@dataclass
class Gateway:
    url: str
    key: str
    runtime: Runtime

    def openai(self, key: str | None = None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=f"{self.url}/v1", api_key=key or self.key, max_retries=0, timeout=20
        )

    def anthropic(self, key: str | None = None) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=self.url, api_key=key or self.key, max_retries=0, timeout=20
        )


@asynccontextmanager
async def open_gateway(tmp_path: Path, **overrides: object) -> AsyncIterator[Gateway]:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    # --no-auth on loopback: the dialects are under test, not sign-in (tests/identity).
    kwargs: dict[str, object] = {
        "data_dir": tmp_path,
        "config_path": config,
        "auth": AuthSettings(enabled=False),
    }
    kwargs.update(overrides)
    settings = Settings(**kwargs)  # type: ignore[arg-type]
    async with open_runtime(settings) as runtime:
        key, _ = await runtime.db.api_keys.create("compat tests")
        app = create_app(runtime)
        try:
            async with serve_app(app) as url:
                yield Gateway(url=url, key=key, runtime=runtime)
        finally:
            await app.state.close_gateway()  # serve_app runs no lifespan


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with open_gateway(tmp_path) as gw:
        yield gw


@pytest.fixture
async def stalling_gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    """A gateway whose idle timeout is 1 s (scenario 40, with 1 s for the reference's 20 min)."""
    async with open_gateway(tmp_path, gateway_idle_timeout=1.0) as gw:
        yield gw
