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
    monkeypatch.delenv("DRUPE_SECRET_KEY_PREVIOUS", raising=False)


def _opens_with(key: bytes, stored: str) -> str:
    """What Fernet itself, with ``key`` alone, reads in a stored value (raises if it cannot)."""
    assert is_sealed(stored)
    return Fernet(key).decrypt(stored.removeprefix("fernet:").encode()).decode()


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


def test_a_rotated_key_opens_what_the_previous_one_sealed_and_reseals_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    monkeypatch.setenv("DRUPE_SECRET_KEY", old.decode())
    sealed = SecretBox(tmp_path).seal(SECRET)
    assert _opens_with(old, sealed) == SECRET

    # The new key alone cannot read it; the message says where the old key goes.
    monkeypatch.setenv("DRUPE_SECRET_KEY", new.decode())
    with pytest.raises(SecretUnreadable, match="DRUPE_SECRET_KEY_PREVIOUS") as refused:
        SecretBox(tmp_path).open(sealed)
    assert SECRET not in str(refused.value) and old.decode() not in str(refused.value)

    # With the old key listed as previous (after another one, as a second rotation leaves it):
    # it opens, and reseal gives a value the new key alone opens; new values use the new key.
    passphrase = "an earlier passphrase of more than 32 characters"
    monkeypatch.setenv("DRUPE_SECRET_KEY_PREVIOUS", f"{passphrase}, {old.decode()}")
    box = SecretBox(tmp_path)
    assert box.previous_keys == ("DRUPE_SECRET_KEY_PREVIOUS",)
    assert box.open(sealed) == SECRET
    fresh = box.reseal(sealed)
    assert fresh is not None and fresh != sealed
    assert _opens_with(new, fresh) == SECRET
    assert box.reseal(fresh) is None  # already under the current key
    assert _opens_with(new, box.seal("k")) == "k"
    assert _opens_with(new, box.reseal("plain-old-key") or "") == "plain-old-key"

    # A value under none of the keys stays unreadable; reseal says so instead of guessing.
    stranger = "fernet:" + Fernet(Fernet.generate_key()).encrypt(b"x").decode()
    with pytest.raises(SecretUnreadable):
        box.reseal(stranger)


def test_a_malformed_previous_key_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRUPE_SECRET_KEY", Fernet.generate_key().decode())
    monkeypatch.setenv("DRUPE_SECRET_KEY_PREVIOUS", "short")
    with pytest.raises(ConfigError, match="DRUPE_SECRET_KEY_PREVIOUS"):
        SecretBox(tmp_path).seal(SECRET)


def test_moving_from_the_key_file_to_the_variable_keeps_the_file_as_a_previous_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sealed = SecretBox(tmp_path / "a").seal(SECRET)  # under the data dir's secret.key
    file_key = (tmp_path / "a" / KEY_FILE).read_bytes().strip()
    assert _opens_with(file_key, sealed) == SECRET

    new = Fernet.generate_key()
    monkeypatch.setenv("DRUPE_SECRET_KEY", new.decode())
    box = SecretBox(tmp_path / "a")
    assert box.source == "DRUPE_SECRET_KEY"
    assert box.previous_keys == (str(tmp_path / "a" / KEY_FILE),)
    assert box.open(sealed) == SECRET
    fresh = box.reseal(sealed)
    assert fresh is not None and _opens_with(new, fresh) == SECRET
    # With the variable set, a data dir without the file gets none made.
    assert SecretBox(tmp_path / "b").previous_keys == ()
    assert not (tmp_path / "b" / KEY_FILE).exists()


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

        # A row written before sealing existed (plain text) is sealed by reseal.
        async with db.transactions.write() as session:
            await session.execute(
                text(
                    "INSERT INTO provider_settings (name, type, api_key, models, updated_at) "
                    "VALUES ('old', 'openai', :k, '[]', CURRENT_TIMESTAMP)"
                ),
                {"k": SECRET},
            )
        assert (await store.get("old")).api_key == SECRET  # type: ignore[union-attr]
        assert await store.reseal() == 1
        raw = await _raw_key(db, "old")
        assert raw is not None and is_sealed(raw)
        assert (await store.get("old")).api_key == SECRET  # type: ignore[union-attr]
        assert await store.reseal() == 0

    # Another data dir (another key): the key reads as unreadable, the provider is still there.
    async with open_database(
        target.url, data_dir=tmp_path / "other", connect_args=target.connect_args
    ) as db:
        got = await db.provider_settings.get("lab")
        assert got is not None and got.api_key is None and got.key_unreadable


async def test_a_start_reseals_the_stored_secrets_under_the_rotated_key(
    target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored provider keys and live sessions' ID tokens, sealed under the old key, are sealed
    under the new one by the runtime's start; after it the old key is no longer needed."""
    from drupe.app.runtime import reseal_secrets

    old, new = Fernet.generate_key(), Fernet.generate_key()
    monkeypatch.setenv("DRUPE_SECRET_KEY", old.decode())
    async with open_database(target.url, data_dir=tmp_path, connect_args=target.connect_args) as db:
        await db.provider_settings.create(
            ProviderSetting(name="lab", type="openai", api_key=SECRET)
        )
        user = await db.users.create("rot", password="a long enough password 1")
        _cookie, live = await db.auth_sessions.create(
            user.id, method="oidc", ttl=3600, id_token="eyJ.id-token.sig"
        )
        await db.auth_sessions.create(user.id, method="oidc", ttl=-1, id_token="eyJ.expired.x")

    monkeypatch.setenv("DRUPE_SECRET_KEY", new.decode())
    monkeypatch.setenv("DRUPE_SECRET_KEY_PREVIOUS", old.decode())
    async with open_database(target.url, data_dir=tmp_path, connect_args=target.connect_args) as db:
        await reseal_secrets(db)
        raw = await _raw_key(db, "lab")
        assert raw is not None and _opens_with(new, raw) == SECRET
        async with db.transactions.read() as session:
            tokens = dict(
                (await session.execute(text("SELECT id, id_token FROM auth_sessions"))).all()
            )
        assert _opens_with(new, tokens[live.id]) == "eyJ.id-token.sig"
        expired = next(value for key, value in tokens.items() if key != live.id)
        assert _opens_with(old, expired) == "eyJ.expired.x"  # an ended session is left alone

    # The old key can go now: the provider's key reads with the new key alone.
    monkeypatch.delenv("DRUPE_SECRET_KEY_PREVIOUS")
    async with open_database(target.url, data_dir=tmp_path, connect_args=target.connect_args) as db:
        got = await db.provider_settings.get("lab")
        assert got is not None and got.api_key == SECRET and not got.key_unreadable


async def test_the_runtime_reseals_when_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drupe.app import open_runtime
    from drupe.settings import Settings

    old, new = Fernet.generate_key(), Fernet.generate_key()
    monkeypatch.setenv("DRUPE_SECRET_KEY", old.decode())
    async with open_database(data_dir=tmp_path) as db:
        await db.provider_settings.create(
            ProviderSetting(name="lab", type="openai", api_key=SECRET)
        )
    monkeypatch.setenv("DRUPE_SECRET_KEY", new.decode())
    monkeypatch.setenv("DRUPE_SECRET_KEY_PREVIOUS", old.decode())
    async with open_runtime(Settings(data_dir=tmp_path)) as runtime:
        raw = await _raw_key(runtime.db, "lab")
    assert raw is not None and _opens_with(new, raw) == SECRET


async def test_a_dry_run_counts_what_a_reseal_would_change_and_waits_for_no_writer(
    target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``drupe doctor``'s check (``dry_run``) on a live database: it neither takes the write
    lock nor locks rows, so a writer holding them does not hold it up, and it changes nothing."""
    import anyio

    old, new = Fernet.generate_key(), Fernet.generate_key()
    monkeypatch.setenv("DRUPE_SECRET_KEY", old.decode())
    async with open_database(target.url, data_dir=tmp_path, connect_args=target.connect_args) as db:
        await db.provider_settings.create(
            ProviderSetting(name="lab", type="openai", api_key=SECRET)
        )
        user = await db.users.create("dry", password="a long enough password 1")
        await db.auth_sessions.create(user.id, method="oidc", ttl=3600, id_token="eyJ.id.sig")

    monkeypatch.setenv("DRUPE_SECRET_KEY", new.decode())
    monkeypatch.setenv("DRUPE_SECRET_KEY_PREVIOUS", old.decode())
    async with open_database(target.url, data_dir=tmp_path, connect_args=target.connect_args) as db:
        before = await _raw_key(db, "lab")
        async with db.transactions.write() as writer:  # a writer in the middle of its work
            if target.dialect == "postgresql":
                await writer.execute(text("SELECT id FROM auth_sessions FOR UPDATE"))
                await writer.execute(text("SELECT name FROM provider_settings FOR UPDATE"))
            with anyio.fail_after(10):
                assert await db.provider_settings.reseal(dry_run=True) == 1
                assert await db.auth_sessions.reseal_id_tokens(dry_run=True) == 1
        assert await _raw_key(db, "lab") == before  # nothing changed
        assert _opens_with(old, before or "") == SECRET
        assert await db.provider_settings.reseal() == 1  # the real one still has the work
        assert await db.auth_sessions.reseal_id_tokens() == 1
