"""Runs ``cli_e2e.py`` and ``cli_roll_e2e.py`` (the real bundled Claude Code CLI against a fake
Messages API: the driver alone, then through the host) in a child pytest inside a loopback-only
network namespace, so the CLI can reach nothing but 127.0.0.1.

``unshare -n`` needs root (or user namespaces); where it is refused, the child runs without it
and relies on the environment alone (``ANTHROPIC_BASE_URL`` on loopback,
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, a throwaway ``HOME``/``CLAUDE_CONFIG_DIR``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]
CLI_MODULES = [str(Path(__file__).with_name(name)) for name in ("cli_e2e.py", "cli_roll_e2e.py")]
_NETNS_SCRIPT = (
    "ip link set lo up"
    ' && echo "NETNS-LINKS:$(ip -o link show | cut -d: -f2 | tr -d " \\n")"'
    ' && exec "$@"'
)


def _netns_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, check=False
    )
    return probe.returncode == 0


def test_real_claude_code_cli_end_to_end_offline() -> None:
    inner = [sys.executable, "-m", "pytest", *CLI_MODULES, "-q", "-p", "no:cacheprovider"]
    isolated = _netns_works()
    command = ["unshare", "-n", "sh", "-c", _NETNS_SCRIPT, "sh", *inner] if isolated else inner
    proc = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=280, check=False
    )
    report = f"{proc.stdout[-12000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, report
    summary = proc.stdout.strip().splitlines()[-1]
    # e.g. "19 passed in 17.3s" or "19 passed, 1 warning in 17.3s": passes, and nothing failed
    assert re.search(r"\b\d+ passed\b", summary), report
    assert not re.search(r"\b\d+ (failed|errors?|skipped)\b", summary), report
    if isolated:
        # The child saw one network interface: the namespace's own loopback.
        assert "NETNS-LINKS:lo\n" in proc.stdout, report
