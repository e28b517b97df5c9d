"""Build a pydantic-ai ``Model`` for one configured provider and model name.

Owns the mapping from a :class:`~drupe.agent.models.config.ProviderConfig` to pydantic-ai's
model and provider classes. The wire formats are pydantic-ai's (and the official SDKs'); this
module never speaks HTTP itself. Provider modules are imported lazily, inside the builder, because
``pydantic_ai.models.anthropic`` alone costs 1-2 s to import. Building a model never touches the
network. Every value is passed explicitly, so the SDKs never fall back to ``os.environ``.

SDK retries are switched off (``max_retries=0``) for the OpenAI and Anthropic clients: Drupe's
agent loop owns retrying, so that each wait can be reported to subscribers as a ``data-retry``
chunk and ``Retry-After`` is honoured once, not twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drupe.agent.models.config import ProviderConfig
from drupe.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings

__all__ = ["KEYLESS_API_KEY", "build_provider_model"]

#: what keyless OpenAI-compatible servers (Ollama, vLLM, llama.cpp) are sent as a key
KEYLESS_API_KEY = "drupe-keyless"

_OPENAI_URL = "https://api.openai.com/v1"
_ANTHROPIC_URL = "https://api.anthropic.com"


def build_provider_model(
    provider: ProviderConfig, model_name: str, *, context_window: int | None = None
) -> Model:
    """Construct (never connect) the pydantic-ai model for ``provider`` and ``model_name``.

    Raises :class:`ConfigError` when the provider needs a key it does not have; the message
    names the environment variable to set.
    """
    if not provider.has_key:
        raise ConfigError(provider.missing_key_message())
    api_key = provider.api_key or KEYLESS_API_KEY
    window = context_window or provider.context_window
    match provider.flavor:
        case "openai":
            return _openai_chat(model_name, provider.base_url or _OPENAI_URL, api_key, window)
        case "compatible":
            assert provider.base_url is not None, "openai-compatible providers carry a base_url"
            return _openai_chat(
                model_name, provider.base_url, api_key, window, non_openai_server=True
            )
        case "openrouter":
            return _openrouter(model_name, api_key, window)
        case "deepseek":
            return _deepseek(model_name, api_key, window)
        case "anthropic":
            return _anthropic(model_name, provider.base_url or _ANTHROPIC_URL, api_key, window)
        case "google":
            return _google(model_name, provider.base_url, api_key, window)


def _sdk_settings() -> ModelSettings:
    from pydantic_ai.settings import ModelSettings

    return ModelSettings(max_retries=0)


def _openai_chat(
    model_name: str,
    base_url: str,
    api_key: str,
    context_window: int | None,
    *,
    non_openai_server: bool = False,
) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.profiles.openai import OpenAIModelProfile
    from pydantic_ai.providers.openai import OpenAIProvider

    profile = OpenAIModelProfile()
    if non_openai_server:
        # llama.cpp, Ollama and vLLM ignore `max_completion_tokens`; send `max_tokens` instead.
        profile["openai_chat_supports_max_completion_tokens"] = False
    if context_window is not None:
        profile["context_window"] = context_window
    return OpenAIChatModel(
        model_name,
        provider=OpenAIProvider(base_url=base_url, api_key=api_key),
        profile=profile or None,
        settings=_sdk_settings(),
    )


def _openrouter(model_name: str, api_key: str, context_window: int | None) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.profiles import ModelProfile
    from pydantic_ai.providers.openrouter import OpenRouterProvider

    return OpenAIChatModel(
        model_name,
        provider=OpenRouterProvider(api_key=api_key, app_title="Drupe"),
        profile=ModelProfile(context_window=context_window) if context_window else None,
        settings=_sdk_settings(),
    )


def _deepseek(model_name: str, api_key: str, context_window: int | None) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.profiles import ModelProfile
    from pydantic_ai.providers.deepseek import DeepSeekProvider

    return OpenAIChatModel(
        model_name,
        provider=DeepSeekProvider(api_key=api_key),
        profile=ModelProfile(context_window=context_window) if context_window else None,
        settings=_sdk_settings(),
    )


def _anthropic(model_name: str, base_url: str, api_key: str, context_window: int | None) -> Model:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.profiles import ModelProfile
    from pydantic_ai.providers.anthropic import AnthropicProvider

    return AnthropicModel(
        model_name,
        provider=AnthropicProvider(api_key=api_key, base_url=base_url),
        profile=ModelProfile(context_window=context_window) if context_window else None,
        settings=_sdk_settings(),
    )


def _google(
    model_name: str, base_url: str | None, api_key: str, context_window: int | None
) -> Model:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.profiles import ModelProfile
    from pydantic_ai.providers.google import GoogleProvider

    # Google's client makes no retries by default, so there is nothing to switch off.
    return GoogleModel(
        model_name,
        provider=GoogleProvider(api_key=api_key, base_url=base_url),
        profile=ModelProfile(context_window=context_window) if context_window else None,
    )
