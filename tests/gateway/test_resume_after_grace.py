"""Issue 8, point 9: once the grace period is over, a resume answers 204 (nothing is left)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from drupe.app import Runtime
from drupe.settings import Settings
from drupe.streaming.config import StreamConfig
from tests.gateway.conftest import make_settings
from tests.gateway.sse import chat_body


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path, stream=StreamConfig(max_listeners=4, grace_period=0))


async def test_resume_is_204_once_the_grace_period_is_over(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    assert runtime.manager.config.grace_period == 0
    assert (await http.post("/api/chat", json=chat_body("c-over", "x"))).status_code == 200
    assert (await http.get("/api/chat/c-over/stream")).status_code == 204
