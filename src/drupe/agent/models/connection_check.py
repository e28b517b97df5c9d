""" "Test connection" for a model provider: one real, cheap call through the provider's SDK.

``check_connection(provider)`` lists the provider's models (OpenAI and OpenAI-compatible servers
through the ``openai`` client, Anthropic through ``anthropic``, Google through ``google-genai``)
within ``limit_s`` seconds and answers a :class:`ConnectionCheck`: ok and the latency, or the
error as text. It never raises for a provider-side failure, never retries and never logs; the
API key is passed explicitly and never appears in the answer (an SDK message that echoes it is
masked).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio

from drupe.agent.models.config import ProviderConfig
from drupe.agent.models.providers import KEYLESS_API_KEY

__all__ = ["ConnectionCheck", "check_connection"]

_OPENAI_URL = "https://api.openai.com/v1"
_FLAVOR_URLS = {
    "openrouter": "https://openrouter.ai/api/v1",
    "deepseek": "https://api.deepseek.com",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionCheck:
    ok: bool
    latency_ms: int
    models: int | None = None
    """How many models the provider listed (None when the call failed)."""
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "latencyMs": self.latency_ms,
            "models": self.models,
            "error": self.error,
        }


async def check_connection(provider: ProviderConfig, *, limit_s: float = 5.0) -> ConnectionCheck:
    """Call the provider once; ok and latency, or what went wrong."""
    started = time.monotonic()

    def elapsed() -> int:
        return round((time.monotonic() - started) * 1000)

    if not provider.has_key:
        return ConnectionCheck(ok=False, latency_ms=0, error=provider.missing_key_message())
    key = provider.api_key or KEYLESS_API_KEY
    try:
        with anyio.fail_after(limit_s):
            count = await _list_models(provider, key, limit_s)
    except TimeoutError:
        return ConnectionCheck(
            ok=False, latency_ms=elapsed(), error=f"no answer within {limit_s:g} s"
        )
    except Exception as err:
        return ConnectionCheck(ok=False, latency_ms=elapsed(), error=_describe(err, key))
    return ConnectionCheck(ok=True, latency_ms=elapsed(), models=count)


async def _list_models(provider: ProviderConfig, key: str, limit_s: float) -> int:
    if provider.flavor == "anthropic":
        from anthropic import AsyncAnthropic

        async with AsyncAnthropic(
            api_key=key, base_url=provider.base_url, timeout=limit_s, max_retries=0
        ) as anthropic_client:
            page = await anthropic_client.models.list()
            return len(page.data)
    if provider.flavor == "google":
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=provider.base_url, timeout=int(limit_s * 1000))
        google_client = genai.Client(api_key=key, http_options=options)
        pager = await google_client.aio.models.list()
        return len(pager.page)
    from openai import AsyncOpenAI

    url = provider.base_url or _FLAVOR_URLS.get(provider.flavor, _OPENAI_URL)
    async with AsyncOpenAI(
        api_key=key, base_url=url, timeout=limit_s, max_retries=0
    ) as openai_client:
        listed = await openai_client.models.list()
        return len(listed.data)


def _describe(err: Exception, key: str) -> str:
    text = str(err) or type(err).__name__
    if key and key != KEYLESS_API_KEY and len(key) >= 4:
        text = text.replace(key, "…" + key[-4:])
    cause = err.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text} ({cause})"
    return text
