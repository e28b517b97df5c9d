"""Settings from the environment: explicit knobs, clear errors, secure defaults."""

from __future__ import annotations

import pytest

from drupe.settings import Settings


def test_defaults_are_the_secure_embedded_ones() -> None:
    settings = Settings.from_env({})
    assert settings.host == "127.0.0.1"
    assert settings.require_gateway_keys is True
    assert settings.code_execution is False
    assert settings.stream.background_mode == "continue"


def test_environment_overrides() -> None:
    settings = Settings.from_env(
        {
            "DRUPE_PORT": "9000",
            "DRUPE_GATEWAY_IDLE_TIMEOUT": "12.5",
            "DRUPE_IDLE_TIMEOUT": "60",
            "DRUPE_GRACE_PERIOD": "5",
            "DRUPE_BACKGROUND_MODE": "abort",
            "DRUPE_MAX_STATUS_RECORDS": "500",
            "DRUPE_ALLOWED_ORIGINS": "http://a.example, http://b.example",
            "DRUPE_CODE_EXECUTION": "1",
        }
    )
    assert settings.port == 9000
    assert settings.gateway_idle_timeout == 12.5
    assert settings.stream.idle_timeout == 60 and settings.stream.grace_period == 5
    assert settings.stream.background_mode == "abort"
    assert settings.stream.max_status_records == 500
    assert settings.allowed_origins == ("http://a.example", "http://b.example")
    assert settings.code_execution is True


def test_a_bad_background_mode_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="DRUPE_BACKGROUND_MODE"):
        Settings.from_env({"DRUPE_BACKGROUND_MODE": "sometimes"})


def test_checkpoint_settings_come_from_the_environment() -> None:
    defaults = Settings.from_env({}).checkpoints
    assert (defaults.interval, defaults.max_bytes, defaults.max_loss) == (1.0, 16_384, 0.02)
    settings = Settings.from_env(
        {
            "DRUPE_CHECKPOINT_INTERVAL": "0.5",
            "DRUPE_CHECKPOINT_BYTES": "4096",
            "DRUPE_CHECKPOINT_MAX_LOSS": "0.05",
        }
    )
    assert settings.checkpoints.interval == 0.5
    assert settings.checkpoints.max_bytes == 4096
    assert settings.checkpoints.max_loss == 0.05
    assert not Settings.from_env({"DRUPE_CHECKPOINT_INTERVAL": "0"}).checkpoints.enabled


def test_a_bad_checkpoint_setting_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="max_loss"):
        Settings.from_env({"DRUPE_CHECKPOINT_MAX_LOSS": "1.5"})
