"""``drupe serve --server uvicorn|granian`` as a real process: it serves, it streams, and a
SIGINT in the middle of an answer shuts it down gracefully with the partial answer persisted
(seen by the next server on the same data dir). ``--server granian --workers 2`` is refused.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from drupe.settings import SERVERS

SLOW = "scripted:lorem?words=400&rate=40"  # a 10 s answer: still live at the signal


def _serve(tmp_path: Path, server: str) -> tuple[subprocess.Popen[str], str]:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "scripted:echo"\n')
    process = subprocess.Popen(
        [sys.executable, "-m", "drupe", "serve", "--port", "0", "--data-dir", str(tmp_path),
         "--config", str(config), "--no-auth", "--server", server],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    if "Open http://127.0.0.1:" not in line:
        process.kill()
        raise AssertionError(line + (process.stderr.read() if process.stderr else ""))
    return process, line.split("Open ", 1)[1].strip()


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode in (0, 130, -signal.SIGINT)


@pytest.mark.parametrize("server", SERVERS)
def test_a_sigint_mid_answer_persists_the_live_answer(tmp_path: Path, server: str) -> None:
    process, url = _serve(tmp_path, server)
    try:
        assert httpx.get(f"{url}/healthz", timeout=20).json() == {"status": "ok"}
        body = {
            "id": "c-live",
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "x"}]}],
            "trigger": "submit-message",
            "models": [SLOW],
        }
        deltas = 0
        with httpx.stream("POST", f"{url}/api/chat", json=body, timeout=20) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: {") and json.loads(line[6:])["type"] == "text-delta":
                    deltas += 1
                    if deltas == 5:
                        break
    finally:
        _stop(process)
    process, url = _serve(tmp_path, "uvicorn")
    try:
        messages = httpx.get(f"{url}/api/conversations/c-live", timeout=20).json()["messages"]
    finally:
        _stop(process)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    answer = messages[1]
    assert answer["status"] == "paused", "the graceful shutdown's status for a live answer"
    text = "".join(p.get("text", "") for p in answer["parts"] if p["type"] == "text")
    assert len(text.split()) >= 5, "what streamed before the signal is kept"


def test_granian_with_workers_is_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "drupe", "serve", "--server", "granian", "--workers", "2",
         "--data-dir", str(tmp_path), "--no-auth"],
        capture_output=True, text=True, timeout=40,
    )  # fmt: skip
    assert result.returncode == 1
    assert "--workers needs uvicorn" in result.stderr


@pytest.mark.parametrize("server", SERVERS)
def test_a_failed_startup_exits_non_zero_with_the_error(tmp_path: Path, server: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "drupe", "serve", "--port", "0", "--no-auth", "--server", server,
         "--data-dir", str(tmp_path), "--database-url", "postgresql+asyncpg://nobody@127.0.0.1:1/x"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0  # uvicorn: 3 (its startup-failure status), granian: 1
    assert "could not open database" in result.stderr
    assert "Drupe is listening" not in result.stdout
