"""Settings from the environment: explicit knobs, clear errors, secure defaults."""

from __future__ import annotations

import pytest

from drupe.errors import ConfigError
from drupe.settings import ClusterSettings, Settings


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
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"DRUPE_BACKGROUND_MODE": "sometimes"})
    # The variable, the value and the accepted values.
    assert "DRUPE_BACKGROUND_MODE='sometimes'" in str(err.value)
    assert "'continue' or 'abort'" in str(err.value)


def test_a_bad_number_names_its_variable_and_every_bad_one_is_listed() -> None:
    with pytest.raises(ConfigError) as err:
        Settings.from_env(
            {"DRUPE_PORT": "eighty", "DRUPE_LEASE_TTL": "-1", "DRUPE_ON_OWNER_LOSS": "later"}
        )
    message = str(err.value)
    assert "DRUPE_PORT='eighty'" in message and "valid integer" in message
    assert "DRUPE_LEASE_TTL='-1'" in message and "greater than 0" in message
    assert "DRUPE_ON_OWNER_LOSS='later'" in message and "'error' or 'retry'" in message


def test_an_empty_variable_in_the_process_environment_is_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``DRUPE_REDIS_URL=`` (empty) must not turn cluster mode on (the multi-node harness and
    shells that clear a variable by emptying it)."""
    monkeypatch.setenv("DRUPE_REDIS_URL", "")
    monkeypatch.setenv("DRUPE_PORT", "")
    settings = Settings.from_env()
    assert not settings.cluster.enabled and settings.port == 8787


def test_switches_and_unset_values() -> None:
    off = Settings.from_env({"DRUPE_SCHEDULER": "off", "DRUPE_TRACE_STORE": "0", "DRUPE_HOST": ""})
    assert off.run_scheduler is False and off.trace_store is False
    assert off.host == "127.0.0.1"  # an empty value is unset
    assert Settings.from_env({"DRUPE_CODE_EXECUTION": "yes"}).code_execution is True
    with pytest.raises(ConfigError, match="DRUPE_SCHEDULER='sometimes'"):
        Settings.from_env({"DRUPE_SCHEDULER": "sometimes"})
    assert Settings.from_env({"DRUPE_COALESCE_MS": "40"}).cluster.coalesce_window == 0.04


def test_every_variable_the_code_reads_is_in_the_one_list_and_the_doc_is_current() -> None:
    import re
    from pathlib import Path

    import drupe
    from drupe.settings_env import PREFIX, DrupeEnvironment, render_markdown

    root = Path(drupe.__file__).parent
    named = {
        match
        for path in root.rglob("*.py")
        for match in re.findall(r"[\"'](DRUPE_[A-Z_]+)[\"']", path.read_text())
    }
    listed = {PREFIX + name for name in DrupeEnvironment.model_fields}
    assert named <= listed, sorted(named - listed)
    doc = Path(__file__).parents[1] / "docs" / "environment.md"
    assert doc.read_text() == render_markdown(), (
        "run: python -m drupe.settings_env > docs/environment.md"
    )


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


def test_workers_and_the_schedule_poll_come_from_the_environment() -> None:
    settings = Settings.from_env({"DRUPE_WORKERS": "3", "DRUPE_SCHEDULE_POLL": "1.5"})
    assert settings.workers == 3 and settings.schedule_poll == 1.5
    assert Settings.from_env({}).workers == 1 and Settings.from_env({}).schedule_poll == 30.0


PG = "postgresql+asyncpg://drupe@db/drupe"
REDIS = ClusterSettings(redis_url="redis://cache:6379/0")


@pytest.mark.parametrize(
    ("database_url", "cluster", "missing", "present"),
    [
        (None, ClusterSettings(), ["--database-url postgresql", "--redis-url redis://"], []),
        (None, REDIS, ["--database-url postgresql"], ["--redis-url"]),
        (PG, ClusterSettings(), ["--redis-url redis://"], ["--database-url"]),
    ],
)
def test_several_workers_without_cluster_mode_say_what_to_add(
    database_url: str | None, cluster: ClusterSettings, missing: list[str], present: list[str]
) -> None:
    settings = Settings(workers=2, database_url=database_url, cluster=cluster)
    with pytest.raises(ConfigError) as err:
        settings.check()
    message = str(err.value)
    assert message.startswith("--workers 2 runs 2 processes")
    assert all(text in message for text in missing), message
    assert not any(text in message for text in present), message
    Settings(workers=2, database_url=PG, cluster=REDIS).check()  # cluster mode: accepted
    Settings(workers=1).check()  # one process needs nothing


def test_a_bad_worker_count_or_schedule_poll_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        Settings(workers=0).check()
    with pytest.raises(ConfigError, match="DRUPE_SCHEDULE_POLL"):
        Settings(schedule_poll=0).check()


def test_the_server_is_uvicorn_unless_drupe_server_says_granian() -> None:
    assert Settings.from_env({}).server == "uvicorn"
    assert Settings.from_env({"DRUPE_SERVER": "granian"}).server == "granian"
    with pytest.raises(ConfigError, match="DRUPE_SERVER"):
        Settings.from_env({"DRUPE_SERVER": "hypercorn"})
    with pytest.raises(ConfigError, match="--workers needs uvicorn"):
        Settings(server="granian", workers=2).check()
