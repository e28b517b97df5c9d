"""Providers from the database overlaid on ``config.toml`` (issue 22, §5), live.

``config.toml`` (and the environment's built-in providers) stay the base. A provider stored in
the database (``ProviderSettingStore``) is added to it; **a name defined in both is the
database's**: it is the later, explicit act, and the settings API says so on the entry
(``overrides: "config.toml"`` or ``"built-in"``). Database providers come first in the picker.

:class:`LiveModelSettings` owns the base config and one :class:`ModelRegistry`; ``reload()``
rebuilds the registry's config from the base plus the stored providers and drops its model
cache, so a change takes effect on the next resolve without a restart. A node reloads after
its own writes; in cluster mode ``follow()`` also reloads every ``refresh_seconds`` (one small
query), so the other nodes pick a change up within that time.

``check_setting`` holds the rules (name, kind, URL, models); its errors start with the field
they are about (``"baseUrl: ..."``) so a form can show them under that field. API keys are
never put in a message, ``repr`` or log line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Final, Literal
from urllib.parse import urlsplit

import anyio

from drupe.agent.models.config import (
    PROVIDER_TYPES,
    RESERVED_PROVIDERS,
    ModelConfig,
    ModelEntry,
    ProviderConfig,
    ProviderType,
)
from drupe.agent.models.registry import ModelRegistry
from drupe.errors import PersistenceError, ValidationError
from drupe.persistence.provider_settings import ProviderSetting, ProviderSettingStore

__all__ = [
    "LiveModelSettings",
    "check_setting",
    "overlay_config",
    "overridden_source",
    "provider_from_setting",
]

log = logging.getLogger(__name__)

_NAME: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_FLAVOR: Final = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "openai-compatible": "compatible",
}


def check_setting(setting: ProviderSetting) -> None:
    """Raise ``ValidationError`` (``"field: what is wrong"``) unless the provider is usable."""
    if not _NAME.match(setting.name):
        raise ValidationError(
            "name: use 1-64 lowercase letters, digits, '-' or '_', starting with a letter or digit"
        )
    if setting.name in RESERVED_PROVIDERS:
        raise ValidationError(f"name: {setting.name!r} is reserved for Drupe's own models")
    if setting.type not in PROVIDER_TYPES:
        raise ValidationError(
            f"type: unknown provider kind {setting.type!r}; use one of {', '.join(PROVIDER_TYPES)}"
        )
    if setting.base_url is not None:
        parts = urlsplit(setting.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValidationError(
                f"baseUrl: {setting.base_url!r} is not an http:// or https:// URL"
            )
    elif setting.type == "openai-compatible":
        raise ValidationError("baseUrl: an openai-compatible provider needs its server's URL")
    seen: set[str] = set()
    for name, window in setting.models:
        if not name.strip():
            raise ValidationError("models: a model name must not be empty")
        if name in seen:
            raise ValidationError(f"models: {name!r} is listed twice")
        if window is not None and window < 1:
            raise ValidationError(f"models: the context window of {name!r} must be positive")
        seen.add(name)
    if setting.context_window is not None and setting.context_window < 1:
        raise ValidationError("contextWindow: must be a positive number of tokens")


def provider_from_setting(setting: ProviderSetting) -> ProviderConfig:
    """The registry's view of a stored provider (``source="database"``)."""
    kind: ProviderType = next(t for t in PROVIDER_TYPES if t == setting.type)
    return ProviderConfig(
        name=setting.name,
        type=kind,
        flavor=_FLAVOR[kind],  # type: ignore[arg-type]
        base_url=setting.base_url,
        api_key=setting.api_key or None,
        # keyless OpenAI-compatible servers (Ollama, vLLM) need none; the clouds do
        requires_key=kind != "openai-compatible",
        models=tuple(ModelEntry(name=n, context_window=w) for n, w in setting.models),
        context_window=setting.context_window,
        source="database",
    )


def overlay_config(base: ModelConfig, settings: Iterable[ProviderSetting]) -> ModelConfig:
    """``base`` with the stored providers added first; a stored name replaces the base's."""
    stored = {s.name: provider_from_setting(s) for s in settings}
    rest = {n: p for n, p in base.providers.items() if n not in stored}
    return replace(base, providers={**stored, **rest})


def overridden_source(base: ModelConfig, name: str) -> Literal["config.toml", "built-in"] | None:
    """What a stored provider of ``name`` hides: a config.toml table, a built-in, or nothing."""
    hidden = base.providers.get(name)
    if hidden is None:
        return None
    return "config.toml" if hidden.source == "file" else "built-in"


class LiveModelSettings:
    """The base config, the stored providers and the registry built from both."""

    def __init__(
        self,
        base: ModelConfig,
        registry: ModelRegistry,
        store: ProviderSettingStore,
        *,
        refresh_seconds: float = 5.0,
    ) -> None:
        self.base = base
        self.registry = registry
        self._store = store
        self._refresh_seconds = refresh_seconds

    async def reload(self) -> Sequence[ProviderSetting]:
        """Rebuild the registry from the base and the database now; return the stored ones."""
        settings = await self._store.list()
        self.registry.replace_config(overlay_config(self.base, settings))
        return settings

    async def follow(self) -> None:
        """Reload every ``refresh_seconds`` until cancelled (cluster mode: other nodes' writes).

        A failed read keeps the current registry and is retried on the next tick.
        """
        while True:
            await anyio.sleep(self._refresh_seconds)
            try:
                await self.reload()
            except PersistenceError as err:
                log.warning("could not reload the stored model providers: %s", err)
