"""Stored provider API keys are sealed at rest (``drupe.persistence.secret_box``).

Real SQLite and PostgreSQL: the raw column is read with plain SQL, independently of the store.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import text

from drupe.errors import ConfigError
from drupe.persistence import open_database
from drupe.persistence.provider_settings import ProviderSetting
from drupe.persistence.secret_box import KEY_FILE, SecretBox, SecretUnreadable, is_sealed
from tests.persistence.conftest import Target

SECRET = "sk-test-abcdefghijklmnopqrstuvwxyz-0123"

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRUPE_SECRET_KEY", raising=False)


def test_a_sealed_secret_opens_only_with_its_key(tmp_path: Path) -> None:
    box = SecretBox(tmp_path / "a")
    sealed = box.seal(SECRET)
    assert is_sealed(sealed) and SECRET not in sealed
    assert box.seal(SECRET) != sealed  # a random IV each time
    assert box.open(sealed) == SECRET
    # The key lives in the data dir, readable by its owner only, and a second box there shares it.
    key_file = tmp_path / "a" / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert SecretBox(tmp_path / "a").open(sealed) == SECRET
    # Another data dir has another key: refused, and the message holds no secret.
    with pytest.raises(SecretUnreadable) as refused:
        SecretBox(tmp_path / "b").open(sealed)
    assert "DRUPE_SECRET_KEY" in str(refused.value) and SECRET not in str(refused.value)
    assert SECRET not in repr(box)
    # A value stored before sealing existed is plain text and opens as itself.
    assert box.open("plain-old-key") == "plain-old-key"


def test_a_box_that_is_never_used_creates_no_key_file(tmp_path: Path) -> None:
    SecretBox(tmp_path)
    assert not (tmp_path / KEY_FILE).exists()


def test_the_environment_key_is_shared_by_nodes_with_different_data_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRUPE_SECRET_KEY", Fernet.generate_key().decode())
    sealed = SecretBox(tmp_path / "node-1").seal(SECRET)
    assert SecretBox(tmp_path / "node-2").open(sealed) == SECRET
    assert not (tmp_path / "node-1" / KEY_FILE).exists()
    # A long passphrase works too (stretched), and it is a different key from the Fernet one.
    monkeypatch.setenv("DRUPE_SECRET_KEY", "x" * 40)
    with pytest.raises(SecretUnreadable):
        SecretBox(tmp_path / "node-3").open(sealed)
    assert SecretBox(tmp_path / "node-3").open(SecretBox(tmp_path).seal("k")) == "k"


def test_a_short_environment_key_is_refused_with_how_to_make_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRUPE_SECRET_KEY", "too-short")
    with pytest.raises(ConfigError, match="at least 32 characters"):
        SecretBox(tmp_path).seal(SECRET)


async def _raw_key(db: object, name: str) -> str | None:
    async with db.transactions.read() as session:  # type: ignore[attr-defined]
        row = await session.execute(
            text("SELECT api_key FROM provider_settings WHERE name = :n"), {"n": name}
        )
        value = row.scalar_one()
        return None if value is None else str(value)


async def test_the_store_keeps_only_the_sealed_key(target: Target, tmp_path: Path) -> None:
    async with open_database(target.url, data_dir=tmp_path, connect_args=target.connect_args) as db:
        store = db.provider_settings
        await store.create(ProviderSetting(name="lab", type="openai", api_key=SECRET))
        raw = await _raw_key(db, "lab")
        assert raw is not None and is_sealed(raw) and SECRET not in raw
        got = await store.get("lab")
        assert got is not None and got.api_key == SECRET and not got.key_unreadable

        await store.replace(ProviderSetting(name="lab", type="openai", api_key="sk-new-key-9876"))
        raw = await _raw_key(db, "lab")
        assert raw is not None and is_sealed(raw) and "sk-new" not in raw
        assert [s.api_key for s in await store.list()] == ["sk-new-key-9876"]

        # A row written before sealing existed (plain text) is sealed by seal_plaintext.
        async with db.transactions.write() as session:
            await session.execute(
                text(
                    "INSERT INTO provider_settings (name, type, api_key, models, updated_at) "
                    "VALUES ('old', 'openai', :k, '[]', CURRENT_TIMESTAMP)"
                ),
                {"k": SECRET},
            )
        assert (await store.get("old")).api_key == SECRET  # type: ignore[union-attr]
        assert await store.seal_plaintext() == 1
        raw = await _raw_key(db, "old")
        assert raw is not None and is_sealed(raw)
        assert (await store.get("old")).api_key == SECRET  # type: ignore[union-attr]
        assert await store.seal_plaintext() == 0

    # Another data dir (another key): the key reads as unreadable, the provider is still there.
    async with open_database(
        target.url, data_dir=tmp_path / "other", connect_args=target.connect_args
    ) as db:
        got = await db.provider_settings.get("lab")
        assert got is not None and got.api_key is None and got.key_unreadable
