"""``AdapterRegistry``: channel type -> adapter factory, filled explicitly (never at import).

``default_registry()`` registers the three built-in types; each factory imports its platform
SDK only when a channel of that type is configured, so ``drupe[channels]`` stays optional (a
missing SDK fails that channel with a message naming the extra; ``UnavailableAdapter`` stands
in for it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from drupe.errors import ConfigError

if TYPE_CHECKING:
    from drupe.channels.config import ChannelConfig
    from drupe.channels.contract import ChannelAdapter

__all__ = ["AdapterFactory", "AdapterRegistry", "UnavailableAdapter", "default_registry"]

AdapterFactory = Callable[["ChannelConfig"], "ChannelAdapter"]


class AdapterRegistry:
    def __init__(self) -> None:
        self._factories: dict[str, AdapterFactory] = {}

    def register(self, channel_type: str, factory: AdapterFactory) -> None:
        self._factories[channel_type] = factory

    def __contains__(self, channel_type: str) -> bool:
        return channel_type in self._factories

    def create(self, config: ChannelConfig) -> ChannelAdapter:
        factory = self._factories.get(config.type)
        if factory is None:
            raise ConfigError(f"no channel adapter of type {config.type!r} is registered")
        return factory(config)


def _telegram(config: ChannelConfig) -> ChannelAdapter:
    try:
        from drupe.channels.telegram import TelegramAdapter
    except ImportError as err:
        raise ConfigError(f"Telegram needs `pip install 'drupe[channels]'` ({err})") from err
    adapter: ChannelAdapter = TelegramAdapter(config)
    return adapter


def _slack(config: ChannelConfig) -> ChannelAdapter:
    try:
        from drupe.channels.slack import SlackAdapter
    except ImportError as err:
        raise ConfigError(f"Slack needs `pip install 'drupe[channels]'` ({err})") from err
    adapter: ChannelAdapter = SlackAdapter(config)
    return adapter


def _webhook(config: ChannelConfig) -> ChannelAdapter:
    from drupe.channels.webhook import WebhookAdapter

    adapter: ChannelAdapter = WebhookAdapter(config)
    return adapter


def default_registry() -> AdapterRegistry:
    registry = AdapterRegistry()
    registry.register("telegram", _telegram)
    registry.register("slack", _slack)
    registry.register("webhook", _webhook)
    return registry


class UnavailableAdapter:
    """Stands in for an adapter that could not be built (its SDK is missing, ...)."""

    buttons = False
    limit = 4096

    def __init__(self, config: ChannelConfig) -> None:
        self.config = config

    async def run(self, inbox: Any, *, receive: bool = True) -> None:
        await anyio.sleep_forever()

    async def send(self, chat_id: str, text: str, *, buttons: Any = ()) -> str:
        raise RuntimeError(f"channel {self.config.id!r} is not running")

    async def edit(
        self, chat_id: str, message_id: str, text: str, *, drop_buttons: bool = False
    ) -> None:
        raise RuntimeError(f"channel {self.config.id!r} is not running")

    async def typing(self, chat_id: str) -> None:
        return None

    async def answer(self, press: Any, text: str) -> None:
        return None

    async def handle_http(self, request: Any, path: str) -> Any:
        from starlette.responses import JSONResponse  # the HTTP edge has it (not this module)

        return JSONResponse({"detail": f"channel {self.config.id!r} is not running"}, 503)
