"""Fixtures: a real runtime (scripted models, SQLite), loopback fakes of the platforms, and
the channel service wired exactly as the composition root wires it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from drupe.app import Runtime, channel_service, open_runtime
from drupe.channels.config import ChannelConfig, parse_channel_configs
from drupe.channels.outbox import Clock
from drupe.channels.service import ChannelService
from drupe.settings import AuthSettings, Settings
from drupe.testing.fake_slack import FakeSlack, fake_slack
from drupe.testing.fake_telegram import FakeTelegram, fake_telegram

TG_TOKEN = "123456789:TESTtokenTESTtokenTESTtokenTESTtoken"
ENV = {
    "TG_TOKEN": TG_TOKEN,
    "HOOK_SECRET": "hook-secret-value-1234",
    "SLACK_TOKEN": "xoxb-test-1",
    "SLACK_SECRET": "slack-signing-secret-1234",
}
ALICE = 1001
CHAT_A = 5001
CHAT_B = 5002


def settings_for(tmp_path: Path, default_model: str = "scripted:echo") -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(f'default_model = "{default_model}"\n')
    # --no-auth on loopback: the channels are under test, not sign-in (tests/identity).
    return Settings(data_dir=tmp_path, config_path=config, auth=AuthSettings(enabled=False))


def telegram_config(base_url: str, **overrides: Any) -> ChannelConfig:
    table: dict[str, Any] = {
        "type": "telegram",
        "token_env": "TG_TOKEN",
        "allowed_users": [str(ALICE)],
        "target": "model:scripted:echo",
        "debounce": 0,
        "base_url": base_url,
    }
    table.update(overrides)
    return parse_channel_configs({"channels": {"tg": table}}, ENV)[0]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return settings_for(tmp_path)


@pytest.fixture
async def runtime(settings: Settings) -> AsyncIterator[Runtime]:
    async with open_runtime(settings) as rt:
        yield rt


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with fake_slack() as fake:
        yield fake


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with fake_telegram() as fake:
        yield fake


OpenChannels = Callable[..., AbstractAsyncContextManager[ChannelService]]


@pytest.fixture
def open_channels(runtime: Runtime) -> OpenChannels:
    @asynccontextmanager
    async def opener(
        *configs: ChannelConfig,
        clock: Clock | None = None,
        edit_interval: float = 0.0,
        send_timeout: float | None = None,
        rt: Runtime | None = None,
    ) -> AsyncIterator[ChannelService]:
        service = channel_service(
            rt or runtime,
            list(configs),
            clock=clock,
            edit_interval=edit_interval,
            send_timeout=send_timeout,
        )
        async with service:
            yield service

    return opener
