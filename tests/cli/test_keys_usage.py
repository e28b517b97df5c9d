"""``drupe keys usage``: per-key and per-model gateway usage from the database (CliRunner)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
from typer.testing import CliRunner

from drupe.cli.main import app
from drupe.persistence import open_database
from drupe.persistence.gateway_usage import UsageDelta

runner = CliRunner()


def store_usage(tmp_path: Path, key_id: str) -> None:
    today = datetime.now(UTC).date()

    def request(day_offset: int, key: str | None, model: str, i: int, o: int) -> UsageDelta:
        return UsageDelta(
            day=today - timedelta(days=day_offset), key_id=key, owner_id=None, model=model,
            dialect="chat-completions", input_tokens=i, output_tokens=o,
        )  # fmt: skip

    async def run() -> None:
        async with open_database(None, data_dir=tmp_path) as db:
            await db.gateway_usage.add(
                [
                    request(0, key_id, "fake:fake-1", 11, 3),
                    request(0, key_id, "fake:fake-1", 13, 5),
                    request(0, None, "scripted:echo", 2, 2),
                    request(40, key_id, "fake:fake-1", 1000, 1000),  # outside 30 days
                ]
            )

    anyio.run(run)


def test_keys_usage_totals_per_key_and_model(tmp_path: Path) -> None:
    created = runner.invoke(app, ["keys", "create", "ci bot", "--data-dir", str(tmp_path)])
    assert created.exit_code == 0, created.output
    plaintext = created.output.strip().splitlines()[-1]
    listed = runner.invoke(app, ["keys", "list", "--data-dir", str(tmp_path)])
    key_id, prefix = listed.output.split()[:2]
    store_usage(tmp_path, key_id)

    shown = runner.invoke(app, ["keys", "usage", "--data-dir", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "total  3 requests  26 in  10 out  36 total" in lines
    key_line = next(line for line in lines if key_id in line)
    assert prefix in key_line and "ci bot" in key_line
    assert key_line.endswith("2 requests  24 in  8 out  32 total")
    assert "  (no key)  1 requests  2 in  2 out  4 total" in lines
    assert "  fake:fake-1  2 requests  24 in  8 out  32 total" in lines
    assert plaintext not in shown.output

    old = (datetime.now(UTC).date() - timedelta(days=40)).isoformat()
    one_day = runner.invoke(
        app, ["keys", "usage", "--since", old, "--until", old, "--data-dir", str(tmp_path)]
    )
    assert "total  1 requests  1000 in  1000 out  2000 total" in one_day.output


def test_keys_usage_refuses_a_bad_window_in_one_line(tmp_path: Path) -> None:
    for args, message in (
        (["--since", "2026-02-30"], "--since must be an ISO date"),
        (["--since", "2026-03-02", "--until", "2026-03-01"], "is after until"),
        (["--since", "2026-03-01", "--days", "3"], "not both"),
    ):
        result = runner.invoke(app, ["keys", "usage", *args, "--data-dir", str(tmp_path)])
        assert result.exit_code == 1, args
        assert message in result.output, result.output
    empty = runner.invoke(app, ["keys", "usage", "--data-dir", str(tmp_path)])
    assert empty.exit_code == 0 and "no gateway requests" in empty.output
