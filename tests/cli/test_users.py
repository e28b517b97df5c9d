"""``drupe users`` (issue 20, step 1), exactly as other tools script it: a real SQLite
database in ``--data-dir`` (and ``DRUPE_DATA_DIR``), the password on standard input."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from drupe.cli.main import app
from drupe.persistence.db import open_database

runner = CliRunner()
PASSWORD = "a long enough password"


def users(data_dir: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, ["users", *args, "--data-dir", str(data_dir)], input=stdin)
    return result.exit_code, result.output


def test_create_list_role_disable_and_a_token(tmp_path: Path) -> None:
    code, out = users(tmp_path, "create", "alice", "--admin", "--email", "a@example.org",
                      "--password-stdin", stdin=PASSWORD + "\n")  # fmt: skip
    assert code == 0 and "created admin alice" in out and PASSWORD not in out
    code, out = users(tmp_path, "create", "bob", "--password-stdin", stdin=PASSWORD + "\n")
    assert code == 0 and "created member bob" in out
    code, out = users(tmp_path, "create", "carol", stdin=PASSWORD + "\n")
    assert code == 1 and "--password-stdin" in out
    code, out = users(tmp_path, "create", "bob", "--password-stdin", stdin=PASSWORD + "\n")
    assert code == 1 and "exists already" in out
    code, out = users(tmp_path, "create", "dave", "--password-stdin", stdin="short\n")
    assert code == 1 and "8 to 1024" in out

    code, out = users(tmp_path, "role", "bob", "admin")
    assert code == 0 and "bob is now admin" in out
    code, out = users(tmp_path, "disable", "alice")
    assert code == 0
    code, out = users(tmp_path, "list")
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 2
    assert lines[0].startswith("alice  admin  disabled  a@example.org")
    assert lines[1].startswith("bob  admin  active  -")

    code, out = users(tmp_path, "token", "bob", "--name", "ci")
    assert code == 0
    token = out.strip().splitlines()[-1]
    assert token.startswith("drt_")

    async def check() -> tuple[str | None, str | None, str | None]:
        async with open_database(data_dir=tmp_path) as db:
            owner = await db.users.verify_token(token)
            signed_in = await db.users.authenticate("bob", PASSWORD)
            disabled = await db.users.authenticate("alice", PASSWORD)
            return (
                owner.name if owner else None,
                signed_in.name if signed_in else None,
                disabled.name if disabled else None,
            )

    assert anyio.run(check) == ("bob", "bob", None)
    code, out = users(tmp_path, "token", "nobody")
    assert code == 1 and "unknown user 'nobody'" in out


def test_the_data_dir_comes_from_the_environment_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRUPE_DATA_DIR", str(tmp_path))
    result = runner.invoke(app, ["users", "create", "erin", "--password-stdin"], input=PASSWORD)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "drupe.db").exists()
    listed = runner.invoke(app, ["users", "list"])
    assert "erin  member  active" in listed.output
