"""Issue 23.9: the gateway's body limit and its refusals in each dialect's own shape.

* A 1.6 MB image (2.1 MB as base64) to ``/v1/messages`` through the official ``anthropic`` client is
  answered (the gateway's limit is 20 MiB by default; the browser API keeps 2 MiB).
* Past ``max_gateway_body_bytes`` the 413 is the dialect's error (``openai.APIStatusError`` with
  OpenAI's ``error.code``; Anthropic's ``{"type": "error"}``), as is every unknown ``/v1`` route's
  404; the browser API's refusals stay ``{"detail"}``.
* The limits come from ``[limits]`` in ``config.toml`` and from ``DRUPE_MAX_*`` (which wins).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from drupe.errors import ConfigError
from drupe.settings import Limits, Settings
from tests.gateway.compat.conftest import Gateway, open_gateway


def _image_message(size: int) -> list[dict[str, object]]:
    data = base64.b64encode(os.urandom(size)).decode()
    return [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": data},
                },
                {"type": "text", "text": "what is this?"},
            ],
        }
    ]


async def test_a_large_image_is_answered_and_past_the_limit_is_the_dialects_413(
    gateway: Gateway,
) -> None:
    async with gateway.anthropic() as client:
        message = await client.messages.create(
            model="scripted:echo",
            max_tokens=64,
            messages=_image_message(1_600_000),  # type: ignore[arg-type]
        )
        assert message.type == "message" and message.content
        limit = gateway.runtime.settings.limits.max_gateway_body_bytes
        assert limit >= 20 * 1024 * 1024
        with pytest.raises(anthropic.APIStatusError) as err:
            await client.messages.create(
                model="scripted:echo",
                max_tokens=64,
                messages=_image_message(limit),  # type: ignore[arg-type]
            )
        assert err.value.status_code == 413
        assert err.value.body == {
            "type": "error",
            "error": {"type": "request_too_large", "message": err.value.body["error"]["message"]},  # type: ignore[index]
        }


async def test_unknown_routes_and_too_large_bodies_answer_in_each_dialect(tmp_path: Path) -> None:
    small = Limits(max_body_bytes=4096, max_gateway_body_bytes=8192)
    async with open_gateway(tmp_path, limits=small) as gateway:
        async with gateway.openai() as client:
            with pytest.raises(openai.APIStatusError) as err:
                await client.chat.completions.create(
                    model="scripted:echo", messages=[{"role": "user", "content": "x" * 10_000}]
                )
        assert err.value.status_code == 413
        body = err.value.body
        assert isinstance(body, dict) and body["code"] == "request_too_large"
        async with httpx.AsyncClient(base_url=gateway.url) as http:
            missing = await http.post("/v1/nosuch", json={})
            assert missing.status_code == 404
            assert missing.json()["error"]["type"] == "invalid_request_error"
            pinned = await http.post("/openai/v1/messages/nosuch", json={})
            assert pinned.status_code == 404 and pinned.json()["type"] == "error"
            # Between the two limits: the browser API refuses, the gateway reads it.
            api = await http.post("/api/conversations", content=b"{" + b" " * 5000 + b"}")
            assert api.status_code == 413 and "detail" in api.json()
            unknown_api = await http.get("/api/nosuch")
            assert unknown_api.status_code == 404 and "detail" in unknown_api.json()


def test_limits_come_from_the_config_file_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[limits]\nmax_gateway_body_bytes = 50000000\nmax_body_bytes = 100000\n")
    monkeypatch.delenv("DRUPE_MAX_BODY_BYTES", raising=False)
    monkeypatch.setenv("DRUPE_MAX_GATEWAY_BODY_BYTES", "30000000")
    limits = Settings(config_path=config).with_file_limits().limits
    assert (limits.max_body_bytes, limits.max_gateway_body_bytes) == (100_000, 30_000_000)
    config.write_text("[limits]\nmax_gateway_bytes = 1\n")
    with pytest.raises(ConfigError, match="no key 'max_gateway_bytes'"):
        Settings(config_path=config).with_file_limits()
    config.write_text('[limits]\nmax_body_bytes = "big"\n')
    with pytest.raises(ConfigError, match="max_body_bytes must be a positive whole number"):
        Settings(config_path=config).with_file_limits()
