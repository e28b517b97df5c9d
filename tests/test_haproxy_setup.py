"""``scripts/test`` brings Debian's haproxy for the multi-node tests (``scripts/_haproxy.sh``).

As in ``test_chromium_setup.py``: bash runs ``ensure_haproxy`` with a ``PATH`` holding only
stand-ins for ``id`` and ``apt-get``, so the machine's own haproxy and apt are never touched.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "scripts" / "_haproxy.sh"
BASH = shutil.which("bash") or "/bin/bash"
CHMOD = shutil.which("chmod") or "/bin/chmod"


def _sandbox(tmp_path: Path, *, uid: int) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {
        "id": f'[ "$1" = "-u" ] && echo {uid}',
        "apt-get": f'echo "$*" >> {tmp_path}/apt.log\n'
        f'if [ "$1" = "install" ]; then echo "#!{BASH}" > {bin_dir}/haproxy; '
        f"{CHMOD} +x {bin_dir}/haproxy; fi",
    }.items():
        (bin_dir / name).write_text(f"#!{BASH}\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _ensure(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, "-c", f"source {HELPER} && ensure_haproxy"],
        env={"PATH": str(bin_dir), "HOME": str(bin_dir.parent)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_root_installs_a_missing_haproxy_with_apt(tmp_path: Path) -> None:
    bin_dir = _sandbox(tmp_path, uid=0)
    result = _ensure(bin_dir)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update -qq",
        "install -y -qq haproxy",
    ]
    assert (bin_dir / "haproxy").exists()
    assert _ensure(bin_dir).returncode == 0  # present now: apt is not run again
    assert len((tmp_path / "apt.log").read_text().splitlines()) == 2


def test_without_root_it_stops_with_the_one_command_to_run(tmp_path: Path) -> None:
    result = _ensure(_sandbox(tmp_path, uid=1000))
    assert result.returncode == 1
    assert "run: sudo apt-get install -y haproxy" in result.stderr
    assert not (tmp_path / "apt.log").exists()
