"""The model layer: provider config, the model registry, and the bundled local model.

``load_model_config()`` reads ``config.toml`` and the environment; ``ModelRegistry(config)``
resolves ``provider:model`` ids to pydantic-ai models (OpenAI, Anthropic, Google,
OpenAI-compatible servers, ``scripted:<profile>``, ``local:gemma3-270m``) and lists them for the
picker. Provider SDK modules are imported only when a model of theirs is first resolved.
"""

from __future__ import annotations

from drupe.agent.models.config import ModelConfig, ProviderConfig, load_model_config
from drupe.agent.models.registry import ModelInfo, ModelRegistry, ResolvedModel, split_model_id

__all__ = [
    "ModelConfig",
    "ModelInfo",
    "ModelRegistry",
    "ProviderConfig",
    "ResolvedModel",
    "load_model_config",
    "split_model_id",
]
