"""``drupe task`` (CliRunner) against a real server (uvicorn in a thread, runtime via lifespan)."""

from __future__ import annotations

import httpx
from typer.testing import CliRunner

from drupe.cli.main import app
from tests.cli.test_agent import served

__all__ = ["served"]

runner = CliRunner()


def task(served: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["task", *args, "--url", served])
    return result.exit_code, result.output


def test_create_list_run_pause_resume_delete(served: str) -> None:
    agent = httpx.post(
        f"{served}/api/agents", json={"name": "reporter", "modelId": "scripted:echo"}, timeout=20
    ).json()
    code, out = task(
        served, "create", "morning digest", "--agent", agent["id"], "--prompt", "summarise",
        "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin", "--deliver", "telegram:42",
    )  # fmt: skip
    assert code == 0, out
    schedule_id = out.strip().splitlines()[-1]
    assert schedule_id.startswith("sch_")
    assert "cron 0 9 * * 1-5 (Europe/Berlin)" in out and "enabled" in out
    body = httpx.get(f"{served}/api/schedules/{schedule_id}", timeout=20).json()
    assert body["deliverTo"] == [{"channel": "telegram", "chat": "42"}]
    assert body["nextRunAt"] is not None and body["timeoutMinutes"] == 2

    code, out = task(served, "list")
    assert code == 0 and schedule_id in out and "morning digest" in out

    code, out = task(served, "run", schedule_id)
    assert code == 0, out
    run_id = out.strip().splitlines()[-1]
    code, out = task(served, "pause", schedule_id)
    assert code == 0 and "paused" in out and "next: -" in out
    code, out = task(served, "resume", schedule_id)
    assert code == 0 and "enabled" in out
    code, out = task(served, "status", run_id)
    assert code == 0, out
    code, out = task(served, "show", schedule_id)
    assert code == 0 and "morning digest" in out

    code, out = task(served, "create", "x", "--agent", agent["id"], "--prompt", "p")
    assert code == 1 and "exactly one of --cron, --every or --at" in out
    code, out = task(
        served, "create", "x", "--agent", agent["id"], "--prompt", "p", "--cron", "0 9 * * *",
        "--tz", "Mars/Olympus",
    )  # fmt: skip
    assert code == 1 and "HTTP 422" in out and "unknown time zone" in out
    code, out = task(served, "create", "x", "--agent", "nope", "--prompt", "p", "--every", "60")
    assert code == 1 and "Agent not found: nope" in out

    code, out = task(served, "delete", schedule_id)
    assert code == 0
    code, out = task(served, "show", schedule_id)
    assert code == 1 and "HTTP 404" in out
    # Issue 23.14: the deleted task's run history is kept and reachable.
    kept = httpx.get(f"{served}/api/schedules/{schedule_id}/runs", timeout=20)
    assert kept.status_code == 200 and [r["id"] for r in kept.json()["items"]] == [run_id]
    code, out = task(served, "status", run_id)
    assert code == 0, out
    nothing = httpx.get(f"{served}/api/schedules/sch_nosuch/runs", timeout=20)
    assert nothing.status_code == 404
