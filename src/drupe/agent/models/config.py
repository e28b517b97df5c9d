"""Model provider configuration: the TOML file plus the usual environment variables.

Owns turning ``config.toml`` (in ``platformdirs.user_config_dir("drupe")``, or ``$DRUPE_CONFIG``,
or an explicit path) and an environment mapping into an immutable :class:`ModelConfig`. It is
pure apart from reading that one file: it never imports a provider SDK, never touches the
network and never logs. API keys live only in ``ProviderConfig.api_key``, which is excluded
from every ``repr``; error messages name the environment variable, never the value.

File format::

    default_model = "work:gpt-4.1-mini"
    title_model = "work:gpt-4.1-mini"    # optional: names conversations; "off": first words only

    [providers.work]
    type = "openai-compatible"          # openai | anthropic | google | openai-compatible
    base_url = "https://llm.example.com/v1"
    api_key_env = "WORK_LLM_KEY"         # or api_key = "..." (not recommended)
    models = ["gpt-4.1-mini", { name = "big", context_window = 200000 }]
    context_window = 128000              # optional, for every model of the provider

A ``[providers.<name>]`` table whose name is a built-in provider (``openai``, ``ollama``, ...)
is merged over the built-in defaults, so ``[providers.openai] models = [...]`` only changes the
model list and still takes the key from ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import platformdirs

from drupe.errors import ConfigError
from drupe.settings_env import read_environment

__all__ = [
    "PROVIDER_TYPES",
    "RESERVED_PROVIDERS",
    "ModelConfig",
    "ModelEntry",
    "ProviderConfig",
    "ProviderType",
    "config_path",
    "load_model_config",
]

ProviderType = Literal["openai", "anthropic", "google", "openai-compatible"]
PROVIDER_TYPES: tuple[ProviderType, ...] = get_args(ProviderType)
#: provider names served by Drupe itself (the scripted test model and the bundled local model)
RESERVED_PROVIDERS = frozenset({"scripted", "local"})

#: How a provider talks to pydantic-ai: its own provider class, or plain ``OpenAIProvider``.
ProviderFlavor = Literal["openai", "anthropic", "google", "openrouter", "deepseek", "compatible"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelEntry:
    """One model a provider offers in the picker."""

    name: str
    context_window: int | None = None
    label: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderConfig:
    """One model provider; ``api_key`` never appears in ``repr``."""

    name: str
    type: ProviderType
    flavor: ProviderFlavor
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    #: the variable the key is read from, named in errors when it is missing
    api_key_env: str | None = None
    requires_key: bool = True
    models: tuple[ModelEntry, ...] = ()
    context_window: int | None = None
    #: ``builtin`` providers come from the environment, ``file`` ones from config.toml,
    #: ``database`` ones from the settings API (``drupe.agent.models.overlay``)
    source: Literal["builtin", "file", "database"] = "builtin"

    @property
    def has_key(self) -> bool:
        return bool(self.api_key) or not self.requires_key

    @property
    def is_configured(self) -> bool:
        """True when the user actually set this provider up (a key, or a file table)."""
        if self.source in ("file", "database"):
            return self.has_key
        return self.requires_key and self.has_key

    def missing_key_message(self) -> str:
        where = f"set {self.api_key_env}" if self.api_key_env else "set api_key_env or api_key"
        return (
            f"provider {self.name!r} needs an API key: {where} "
            f"(or configure it in config.toml under [providers.{self.name}])"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Every known provider by name, in priority order, plus the configured default model."""

    providers: Mapping[str, ProviderConfig]
    default_model: str | None = None
    title_model: str | None = None
    """The model that names conversations (None: the default model; ``"off"``: none)."""
    path: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Builtin:
    name: str
    type: ProviderType
    flavor: ProviderFlavor
    key_envs: tuple[str, ...] = ()
    base_url: str | None = None
    base_url_env: str | None = None
    models: tuple[str, ...] = ()


_BUILTINS: tuple[_Builtin, ...] = (
    _Builtin(
        name="openai",
        type="openai",
        flavor="openai",
        key_envs=("OPENAI_API_KEY",),
        base_url_env="OPENAI_BASE_URL",
        models=("gpt-4.1-mini", "gpt-4.1", "gpt-4o-mini"),
    ),
    _Builtin(
        name="anthropic",
        type="anthropic",
        flavor="anthropic",
        key_envs=("ANTHROPIC_API_KEY",),
        base_url_env="ANTHROPIC_BASE_URL",
        models=("claude-sonnet-4-5", "claude-haiku-4-5"),
    ),
    _Builtin(
        name="google",
        type="google",
        flavor="google",
        key_envs=("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        models=("gemini-2.5-flash", "gemini-2.5-pro"),
    ),
    _Builtin(
        name="openrouter",
        type="openai-compatible",
        flavor="openrouter",
        key_envs=("OPENROUTER_API_KEY",),
        base_url="https://openrouter.ai/api/v1",
        models=("openai/gpt-4.1-mini", "anthropic/claude-sonnet-4.5"),
    ),
    _Builtin(
        name="deepseek",
        type="openai-compatible",
        flavor="deepseek",
        key_envs=("DEEPSEEK_API_KEY",),
        base_url="https://api.deepseek.com",
        models=("deepseek-chat", "deepseek-reasoner"),
    ),
    _Builtin(
        name="ollama",
        type="openai-compatible",
        flavor="compatible",
        base_url="http://127.0.0.1:11434/v1",
        base_url_env="OLLAMA_BASE_URL",
    ),
    _Builtin(
        name="vllm",
        type="openai-compatible",
        flavor="compatible",
        base_url="http://127.0.0.1:8000/v1",
        base_url_env="VLLM_BASE_URL",
    ),
    _Builtin(
        name="llamacpp",
        type="openai-compatible",
        flavor="compatible",
        base_url="http://127.0.0.1:8080/v1",
        base_url_env="LLAMACPP_BASE_URL",
    ),
)

_FLAVOR_OF_TYPE: dict[ProviderType, ProviderFlavor] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "openai-compatible": "compatible",
}

_PROVIDER_KEYS = frozenset(
    {"type", "base_url", "api_key", "api_key_env", "models", "context_window"}
)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the config file is read from: ``$DRUPE_CONFIG`` or the user config dir."""
    env = os.environ if env is None else env
    if explicit := env.get("DRUPE_CONFIG"):
        return Path(explicit).expanduser()
    return Path(platformdirs.user_config_dir("drupe")) / "config.toml"


def load_model_config(
    path: Path | None = None, env: Mapping[str, str] | None = None
) -> ModelConfig:
    """Read the config file (if any) and the environment into a :class:`ModelConfig`.

    A missing file at the default location is an empty config; a missing file that was named
    explicitly (argument or ``$DRUPE_CONFIG``), unreadable TOML or a bad table raise
    :class:`~drupe.errors.ConfigError`. ``$DRUPE_DEFAULT_MODEL`` overrides ``default_model``.
    """
    env = os.environ if env is None else env
    explicit = path is not None or bool(env.get("DRUPE_CONFIG"))
    file_path = path if path is not None else config_path(env)
    data: dict[str, Any] = {}
    if file_path.is_file():
        try:
            data = tomllib.loads(file_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise ConfigError(f"cannot read model config {str(file_path)!r}: {err}") from err
    elif explicit:
        raise ConfigError(f"model config file {str(file_path)!r} does not exist")
    return parse_model_config(data, env=env, path=file_path if file_path.is_file() else None)


def parse_model_config(
    data: Mapping[str, Any], *, env: Mapping[str, str], path: Path | None = None
) -> ModelConfig:
    """Build a :class:`ModelConfig` from already-parsed TOML data and an environment."""
    where = str(path) if path is not None else "config"
    providers: dict[str, ProviderConfig] = {b.name: _from_builtin(b, env) for b in _BUILTINS}
    tables = data.get("providers", {})
    if not isinstance(tables, Mapping):
        raise ConfigError(f"{where}: 'providers' must be a table of [providers.<name>] tables")
    file_providers: dict[str, ProviderConfig] = {}
    for name, table in tables.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: [providers.{name}] must be a table")
        file_providers[name] = _from_table(name, table, providers.get(name), env, where)
    # File providers come first: they are what the user chose, and they win the default.
    merged = {**file_providers, **{n: p for n, p in providers.items() if n not in file_providers}}
    default_model = read_environment(env).DEFAULT_MODEL or data.get("default_model")
    if default_model is not None and not isinstance(default_model, str):
        raise ConfigError(f"{where}: default_model must be a string like 'openai:gpt-4.1-mini'")
    title_model = data.get("title_model")
    if title_model is not None and (not isinstance(title_model, str) or not title_model.strip()):
        raise ConfigError(
            f"{where}: title_model must be a model id like 'openai:gpt-4.1-mini' or 'off'"
        )
    # Other top-level tables ([mcp], ...) belong to other parts of Drupe and are not checked here.
    return ModelConfig(
        providers=merged,
        default_model=default_model or None,
        title_model=title_model.strip() if title_model else None,
        path=path,
    )


def _from_builtin(builtin: _Builtin, env: Mapping[str, str]) -> ProviderConfig:
    key_env = next((name for name in builtin.key_envs if env.get(name)), None)
    base_url = (env.get(builtin.base_url_env) if builtin.base_url_env else None) or builtin.base_url
    return ProviderConfig(
        name=builtin.name,
        type=builtin.type,
        flavor=builtin.flavor,
        base_url=base_url,
        api_key=env.get(key_env) if key_env else None,
        api_key_env=key_env or (builtin.key_envs[0] if builtin.key_envs else None),
        requires_key=bool(builtin.key_envs),
        models=tuple(ModelEntry(name=m) for m in builtin.models),
    )


def _from_table(
    name: str,
    table: Mapping[str, Any],
    builtin: ProviderConfig | None,
    env: Mapping[str, str],
    where: str,
) -> ProviderConfig:
    prefix = f"{where}: [providers.{name}]"
    unknown = set(table) - _PROVIDER_KEYS
    if unknown:
        raise ConfigError(f"{prefix} has unknown keys {sorted(unknown)!r}")
    if ":" in name or not name:
        raise ConfigError(f"{prefix}: a provider name cannot be empty or contain ':'")
    if name in RESERVED_PROVIDERS:
        raise ConfigError(f"{prefix}: {name!r} is reserved for Drupe's built-in models")
    ptype = table.get("type", builtin.type if builtin else None)
    if ptype is None:
        raise ConfigError(f"{prefix} needs a type, one of {list(PROVIDER_TYPES)!r}")
    if ptype not in PROVIDER_TYPES:
        raise ConfigError(
            f"{prefix} has unknown type {ptype!r}; known types are {list(PROVIDER_TYPES)!r}"
        )
    base = builtin if builtin is not None and builtin.type == ptype else None
    flavor = base.flavor if base is not None else _FLAVOR_OF_TYPE[ptype]
    base_url = _optional_str(table, "base_url", prefix)
    if base_url is None and base is not None:
        base_url = base.base_url
    if ptype == "openai-compatible" and base_url is None:
        raise ConfigError(f"{prefix} (openai-compatible) needs a base_url")
    api_key = _optional_str(table, "api_key", prefix)
    api_key_env = _optional_str(table, "api_key_env", prefix)
    if api_key is None and api_key_env is not None:
        api_key = env.get(api_key_env) or None
    requires_key = ptype != "openai-compatible" or api_key_env is not None
    if api_key is None and api_key_env is None and base is not None:
        api_key, api_key_env, requires_key = base.api_key, base.api_key_env, base.requires_key
    if api_key is not None:
        requires_key = True
    context_window = table.get("context_window")
    if context_window is not None and (not isinstance(context_window, int) or context_window <= 0):
        raise ConfigError(f"{prefix}: context_window must be a positive integer")
    if "models" in table:
        models = _parse_models(table["models"], prefix)
    else:
        models = base.models if base is not None else ()
    return ProviderConfig(
        name=name,
        type=ptype,
        flavor=flavor,
        base_url=base_url,
        api_key=api_key,
        api_key_env=api_key_env,
        requires_key=requires_key,
        models=models,
        context_window=context_window,
        source="file",
    )


def _optional_str(table: Mapping[str, Any], key: str, prefix: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{prefix}: {key} must be a non-empty string")
    return value


def _parse_models(raw: Any, prefix: str) -> tuple[ModelEntry, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{prefix}: models must be a list of names or {{name = ...}} tables")
    entries: list[ModelEntry] = []
    for item in raw:
        if isinstance(item, str) and item:
            entries.append(ModelEntry(name=item))
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str) and item["name"]:
            window = item.get("context_window")
            label = item.get("label")
            if window is not None and (not isinstance(window, int) or window <= 0):
                raise ConfigError(f"{prefix}: context_window of {item['name']!r} must be > 0")
            if label is not None and not isinstance(label, str):
                raise ConfigError(f"{prefix}: label of {item['name']!r} must be a string")
            entries.append(ModelEntry(name=item["name"], context_window=window, label=label))
        else:
            raise ConfigError(f"{prefix}: bad model entry {item!r}")
    return tuple(entries)
