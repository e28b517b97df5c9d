"""Boot imports only what ``/healthz`` needs (issue 11 §4).

A child process (so that other tests' imports cannot pollute ``sys.modules``) does what
``drupe serve`` does on the embedded defaults: imports the CLI and uvicorn, builds the app with
``create_app_with_lifespan``, runs the ASGI lifespan startup (the runtime opens: database,
reconciliation, manager, drivers, tasks) and sends ``GET /healthz`` to the app. It then reports
which of the heavy packages are in ``sys.modules``. The model layer (pydantic-ai), the Claude
Code driver's SDK (and MCP through it), the channel SDKs, the provider SDKs and the A2A SDK load
on first use;
Alembic loads only when the database is not at the shipped head (the first boot migrates).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "pydantic_ai",
    "claude_agent_sdk",
    "mcp",
    "mcp_types",
    "telegram",
    "slack_bolt",
    "slack_sdk",
    "alembic",
    "openai",
    "anthropic",
    "llama_cpp",
    "httpx",
    "a2a",
    "ag_ui",
)

_PROBE = """
import json, sys
from pathlib import Path

import anyio
import uvicorn  # noqa: F401  (drupe serve imports it)

import drupe.cli.main  # noqa: F401
from drupe.api.app_factory import create_app_with_lifespan
from drupe.settings import Settings

HEAVY = json.loads(sys.argv[1])


def loaded() -> list[str]:
    return sorted(name for name in HEAVY if name in sys.modules)


async def main() -> dict[str, object]:
    app = create_app_with_lifespan(Settings.from_env())
    started = anyio.Event()
    stop = anyio.Event()
    lifespan_out: list[dict[str, object]] = []
    asked = False

    async def lifespan_receive() -> dict[str, object]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "lifespan.startup"}
        await stop.wait()
        return {"type": "lifespan.shutdown"}

    async def lifespan_send(message: dict[str, object]) -> None:
        lifespan_out.append(message)
        if str(message["type"]).startswith("lifespan.startup"):
            started.set()

    http_out: list[dict[str, object]] = []

    async def http_receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def http_send(message: dict[str, object]) -> None:
        http_out.append(message)

    async with anyio.create_task_group() as tg:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        tg.start_soon(app, scope, lifespan_receive, lifespan_send)
        await started.wait()
        request = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": "/healthz", "raw_path": b"/healthz",
            "query_string": b"", "root_path": "", "headers": [],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8787), "state": {},
        }
        await app(request, http_receive, http_send)
        at_healthz = loaded()
        stop.set()
    body = b"".join(m.get("body", b"") for m in http_out if m["type"] == "http.response.body")
    import drupe.agent.loop  # noqa: F401  (the first turn's import: the probe must see it)

    return {
        "lifespan": [m["type"] for m in lifespan_out],
        "status": http_out[0]["status"],
        "body": json.loads(body),
        "at_healthz": at_healthz,
        "after_loop_import": loaded(),
    }


print(json.dumps(anyio.run(main)))
"""


def _boot(home: Path, data_dir: Path) -> dict[str, object]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith("_API_KEY") and not key.startswith("DRUPE_")
    }
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), DRUPE_DATA_DIR=str(data_dir))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(HEAVY)],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_boot_to_healthz_imports_no_heavy_package(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = _boot(tmp_path, data_dir)  # creates and migrates the database
    assert first["lifespan"] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert (first["status"], first["body"]) == (200, {"status": "ok"})
    assert first["at_healthz"] == ["alembic"]

    restart = _boot(tmp_path, data_dir)  # the database is at the shipped head
    assert (restart["status"], restart["body"]) == (200, {"status": "ok"})
    assert restart["at_healthz"] == []
    # the probe sees a heavy package once something imports it (the first turn's loop)
    assert "pydantic_ai" in restart["after_loop_import"]  # type: ignore[operator]
