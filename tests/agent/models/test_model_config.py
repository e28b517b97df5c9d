"""Config parsing: the TOML file, the built-in providers from the environment, and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from drupe.agent.models.config import config_path, load_model_config
from drupe.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_empty_environment_gives_builtin_providers_without_keys(config_file: Path) -> None:
    config = load_model_config(write(config_file, ""), env={})
    assert list(config.providers)[:3] == ["openai", "anthropic", "google"]
    openai = config.providers["openai"]
    assert openai.api_key is None and openai.api_key_env == "OPENAI_API_KEY"
    assert not openai.has_key and not openai.is_configured
    ollama = config.providers["ollama"]
    assert ollama.base_url == "http://127.0.0.1:11434/v1"
    assert ollama.has_key and not ollama.is_configured  # keyless preset, not chosen by the user


def test_env_keys_and_base_urls(config_file: Path) -> None:
    env = {
        "OPENAI_API_KEY": "sk-openai-secret",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "GEMINI_API_KEY": "g-secret",
        "OLLAMA_BASE_URL": "http://10.0.0.2:11434/v1",
    }
    config = load_model_config(write(config_file, ""), env=env)
    openai = config.providers["openai"]
    assert openai.api_key == "sk-openai-secret"
    assert openai.base_url == "http://127.0.0.1:9/v1"
    assert openai.is_configured
    google = config.providers["google"]
    assert google.api_key == "g-secret" and google.api_key_env == "GEMINI_API_KEY"
    assert config.providers["ollama"].base_url == "http://10.0.0.2:11434/v1"


def test_key_never_appears_in_repr(config_file: Path) -> None:
    config = load_model_config(
        write(config_file, ""), env={"ANTHROPIC_API_KEY": "sk-ant-very-secret"}
    )
    assert "sk-ant-very-secret" not in repr(config)
    assert "sk-ant-very-secret" not in repr(config.providers["anthropic"])
    assert "sk-ant-very-secret" not in str(config.providers)


def test_file_providers_come_first_and_merge_over_builtins(config_file: Path) -> None:
    write(
        config_file,
        """
default_model = "work:big"

[providers.work]
type = "openai-compatible"
base_url = "http://127.0.0.1:9999/v1"
api_key_env = "WORK_KEY"
models = ["small", { name = "big", context_window = 200000, label = "Big One" }]
context_window = 8192

[providers.openai]
models = ["gpt-4.1-nano"]

[providers.ollama]
models = ["llama3.2:3b"]
""",
    )
    config = load_model_config(config_file, env={"WORK_KEY": "w-secret", "OPENAI_API_KEY": "k"})
    assert list(config.providers)[:3] == ["work", "openai", "ollama"]
    assert config.default_model == "work:big"
    assert config.path == config_file
    work = config.providers["work"]
    assert work.api_key == "w-secret" and work.context_window == 8192
    assert [m.name for m in work.models] == ["small", "big"]
    assert work.models[1].context_window == 200000 and work.models[1].label == "Big One"
    openai = config.providers["openai"]
    assert openai.api_key == "k" and [m.name for m in openai.models] == ["gpt-4.1-nano"]
    ollama = config.providers["ollama"]
    assert ollama.base_url == "http://127.0.0.1:11434/v1" and ollama.is_configured


def test_drupe_config_env_names_the_file(config_file: Path) -> None:
    write(config_file, 'default_model = "scripted:lorem"\n')
    env = {"DRUPE_CONFIG": str(config_file)}
    assert config_path(env) == config_file
    assert load_model_config(env=env).default_model == "scripted:lorem"


def test_default_model_env_overrides_file(config_file: Path) -> None:
    write(config_file, 'default_model = "scripted:lorem"\n')
    config = load_model_config(config_file, env={"DRUPE_DEFAULT_MODEL": "scripted:echo"})
    assert config.default_model == "scripted:echo"


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_model_config(tmp_path / "nope.toml", env={})


def test_bad_toml_names_the_file(config_file: Path) -> None:
    write(config_file, "[providers.x\n")
    with pytest.raises(ConfigError, match="cannot read model config") as info:
        load_model_config(config_file, env={})
    assert str(config_file) in str(info.value)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[providers.x]\ntype = "cohere"\n', "unknown type 'cohere'.*openai-compatible"),
        ('[providers.x]\nbase_url = "http://h/v1"\n', r"\[providers.x\] needs a type"),
        ('[providers.x]\ntype = "openai-compatible"\n', "needs a base_url"),
        ('[providers.x]\ntype = "openai"\nmodel = ["a"]\n', "unknown keys \\['model'\\]"),
        ('[providers.x]\ntype = "openai"\nmodels = "a"\n', "models must be a list"),
        ('[providers.x]\ntype = "openai"\ncontext_window = -1\n', "positive integer"),
        ("default_model = 3\n", "default_model must be a string"),
        ('[providers.scripted]\ntype = "openai"\n', "'scripted' is reserved"),
    ],
)
def test_bad_tables_are_named(config_file: Path, toml: str, message: str) -> None:
    write(config_file, toml)
    with pytest.raises(ConfigError, match=message):
        load_model_config(config_file, env={})


def test_other_top_level_tables_belong_to_other_parts(config_file: Path) -> None:
    write(config_file, '[mcp.servers.files]\ncommand = "x"\n\n[providers.x]\ntype = "openai"\n')
    assert "x" in load_model_config(config_file, env={}).providers
