"""The ``drupe`` command: keys, db, doctor (CliRunner), and serve + chat as real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from drupe.cli.main import app
from tests.multinode.harness import free_port
from tests.private_redis import PrivateRedis

runner = CliRunner()


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    created = runner.invoke(app, ["keys", "create", "ci bot", "--data-dir", str(tmp_path)])
    assert created.exit_code == 0, created.output
    plaintext = created.output.strip().splitlines()[-1]
    assert plaintext.startswith("drp_") and len(plaintext) == 36
    listed = runner.invoke(app, ["keys", "list", "--data-dir", str(tmp_path)])
    assert listed.exit_code == 0
    assert "ci bot" in listed.output and "active" in listed.output
    assert plaintext not in listed.output, "the plaintext is shown once only"
    key_id = listed.output.split()[0]
    revoked = runner.invoke(app, ["keys", "revoke", key_id, "--data-dir", str(tmp_path)])
    assert revoked.exit_code == 0 and key_id in revoked.output
    listed = runner.invoke(app, ["keys", "list", "--data-dir", str(tmp_path)])
    assert "revoked" in listed.output
    missing = runner.invoke(app, ["keys", "revoke", "nope", "--data-dir", str(tmp_path)])
    assert missing.exit_code == 1
    assert "no API key with id or prefix 'nope'" in missing.output


def test_keys_list_when_empty_says_how_to_create_one(tmp_path: Path) -> None:
    listed = runner.invoke(app, ["keys", "list", "--data-dir", str(tmp_path)])
    assert listed.exit_code == 0 and "drupe keys create" in listed.output


def test_db_upgrade(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    result = runner.invoke(app, ["db", "upgrade", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert "database is at revision" in result.output
    assert (tmp_path / "x.db").exists()
    bad = runner.invoke(app, ["db", "upgrade", "--database-url", "mysql://nowhere/x"])
    assert bad.exit_code == 1 and "error:" in bad.output


def test_doctor_passes_on_a_good_setup(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    result = runner.invoke(app, ["doctor", "--data-dir", str(tmp_path), "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "default model: scripted:echo" in result.output
    assert "no problems found" in result.output


def test_doctor_checks_the_providers_stored_in_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cryptography.fernet import Fernet

    from drupe.persistence import open_database
    from drupe.persistence.provider_settings import ProviderSetting

    monkeypatch.delenv("DRUPE_SECRET_KEY_PREVIOUS", raising=False)
    sealing, other_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    monkeypatch.setenv("DRUPE_SECRET_KEY", sealing)

    async def store() -> None:
        async with open_database(data_dir=tmp_path) as db:
            await db.provider_settings.create(
                ProviderSetting(name="lab", type="openai", api_key="sk-doctor-test-123456")
            )

    anyio.run(store)
    config = tmp_path / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    args = ["doctor", "--data-dir", str(tmp_path), "--config", str(config)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "provider lab: stored in the database" in result.output
    assert "only the local and scripted models" not in result.output
    assert "sk-doctor" not in result.output
    assert "secret keys" not in result.output  # no rotation under way: nothing to say
    # Another secret key than the one that sealed it: the key cannot be opened, and it says so.
    other = runner.invoke(app, args, env={"DRUPE_SECRET_KEY": other_key})
    assert other.exit_code == 1, other.output
    assert "FAIL  provider lab" in other.output and "DRUPE_SECRET_KEY" in other.output
    # A rotation: the old key as the previous one opens it; doctor says a start re-seals it.
    rotating = {"DRUPE_SECRET_KEY": other_key, "DRUPE_SECRET_KEY_PREVIOUS": sealing}
    midway = runner.invoke(app, args, env=rotating)
    assert midway.exit_code == 0, midway.output
    assert "provider lab: stored in the database" in midway.output
    assert "warn  secret keys: 1 stored secret(s) are still sealed under a previous key" in (
        midway.output
    )

    async def start() -> None:  # what the server's start does to the stored secrets
        from drupe.app.runtime import reseal_secrets

        async with open_database(data_dir=tmp_path) as db:
            await reseal_secrets(db)

    monkeypatch.setenv("DRUPE_SECRET_KEY", other_key)
    monkeypatch.setenv("DRUPE_SECRET_KEY_PREVIOUS", sealing)
    anyio.run(start)
    done = runner.invoke(app, args, env=rotating)
    assert "  ok  secret keys: every stored secret is sealed under DRUPE_SECRET_KEY" in (
        done.output
    ), done.output
    alone = runner.invoke(app, args, env={"DRUPE_SECRET_KEY": other_key})
    assert alone.exit_code == 0 and "provider lab: stored in the database" in alone.output


def test_doctor_says_what_is_wrong_and_how_to_fix_it(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "work:big"\n'
        "[providers.work]\n"
        'type = "openai-compatible"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'
        'api_key_env = "DRUPE_TEST_MISSING_KEY"\n'
        'models = ["big"]\n'
    )
    result = runner.invoke(
        app,
        [
            "doctor",
            "--config",
            str(config),
            "--database-url",
            "postgresql://nobody@127.0.0.1:9/nothing",
        ],
        env={"DRUPE_TEST_MISSING_KEY": ""},
    )
    assert result.exit_code == 1
    out = result.output
    assert "FAIL  provider work: no API key" in out
    assert "DRUPE_TEST_MISSING_KEY" in out
    assert "FAIL  database" in out and "drupe db upgrade" in out
    broken = tmp_path / "broken.toml"
    broken.write_text("this is = not [toml")
    result = runner.invoke(app, ["doctor", "--config", str(broken), "--data-dir", str(tmp_path)])
    assert result.exit_code == 1 and "FAIL  config" in result.output


def test_serve_smoke(served: str) -> None:
    assert httpx.get(f"{served}/healthz", timeout=20).json() == {"status": "ok"}
    index = httpx.get(served, timeout=20)
    assert index.status_code == 200 and "<html" in index.text.lower()


def test_chat_streams_an_answer_from_a_running_server(served: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "drupe", "chat", "c-cli", "--url", served],
        input="hello from the terminal\n",
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert result.returncode == 0, result.stderr
    assert "new conversation c-cli" in result.stdout
    assert "You said: hello from the terminal" in result.stdout
    detail = httpx.get(f"{served}/api/conversations/c-cli", timeout=20).json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]
    again = subprocess.run(
        [sys.executable, "-m", "drupe", "chat", "c-cli", "--url", served],
        input="/stop\n/quit\n",
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert again.returncode == 0, again.stderr
    assert "you ▸ hello from the terminal" in again.stdout
    assert "· nothing to stop" in again.stdout
    # A line typed while an answer streams is a steer, answered after the running turn.
    steered = subprocess.run(
        [sys.executable, "-m", "drupe", "chat", "c-steer", "--url", served,
         "--model", "scripted:lorem?words=30&rate=60"],
        input="first question\nsecond thought\n",
        capture_output=True,
        text=True,
        timeout=40,
    )  # fmt: skip
    assert steered.returncode == 0, steered.stderr
    assert "· steer queued: answered after the running turn" in steered.stdout
    messages = httpx.get(f"{served}/api/conversations/c-steer", timeout=20).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [m["status"] for m in messages if m["role"] == "assistant"] == ["success", "success"]
    assert messages[2]["metadata"]["steer"] is True
    assert messages[3]["parentId"] == messages[2]["id"]


def test_chat_says_when_the_server_is_unreachable() -> None:
    result = runner.invoke(app, ["chat", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 1 and "cannot reach Drupe" in result.output


def test_doctor_reports_a_broken_mcp_server(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "scripted:echo"\n[mcp.servers.bad]\ncommand = "/nonexistent/server"\n'
    )
    result = runner.invoke(app, ["doctor", "--data-dir", str(tmp_path), "--config", str(config)])
    assert result.exit_code == 1
    assert "FAIL  mcp bad" in result.output and "/nonexistent/server" in result.output
    assert "[mcp.servers.bad]" in result.output


def test_doctor_names_a_failing_mcp_url_without_its_secrets(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "scripted:echo"\n[mcp.servers.remote]\ntransport = "http"\n'
        'url = "http://user:pw@127.0.0.1:1/mcp?token=s3cret"\n'
    )
    result = runner.invoke(app, ["doctor", "--data-dir", str(tmp_path), "--config", str(config)])
    assert result.exit_code == 1
    assert "FAIL  mcp remote" in result.output and "http://127.0.0.1:1/mcp" in result.output
    assert "s3cret" not in result.output and "pw@" not in result.output


def test_serve_with_workers_but_no_cluster_says_what_to_add(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["serve", "--no-auth", "--workers", "2", "--port", "0", "--data-dir", str(tmp_path)],
        env={},
    )
    assert result.exit_code == 1
    flat = " ".join(result.output.split())
    assert "--workers 2 runs 2 processes" in flat
    assert "add --database-url postgresql+asyncpg://" in flat and "--redis-url redis://" in flat


def test_doctor_checks_cluster_modes_redis(tmp_path: Path) -> None:
    """With ``DRUPE_REDIS_URL`` set, doctor checks Redis: its version (functions need 7.0),
    its eviction policy, its persistence; an unreachable one fails the command."""
    config = tmp_path / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    args = ["doctor", "--data-dir", str(tmp_path), "--config", str(config)]
    evicting = PrivateRedis(free_port(), tmp_path, "--maxmemory-policy", "allkeys-lru")
    evicting.start()
    try:
        result = runner.invoke(app, args, env={"DRUPE_REDIS_URL": evicting.url})
    finally:
        evicting.stop()
    assert result.exit_code == 0, result.output  # a warning, not a failure
    output = " ".join(result.output.split())
    assert f"ok redis: redis://127.0.0.1:{evicting.port}/0: Redis 7." in output
    assert "warn redis eviction: maxmemory-policy allkeys-lru" in output
    assert "ok redis persistence: no AOF" in output

    gone = runner.invoke(app, args, env={"DRUPE_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    assert gone.exit_code == 1
    assert "FAIL redis: redis://127.0.0.1:" in " ".join(gone.output.split())
