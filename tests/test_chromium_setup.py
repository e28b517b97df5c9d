"""``scripts/test`` brings Debian's chromium for the browser tests (issue 8, point 13).

``ensure_chromium`` (``scripts/_chromium.sh``) runs under bash with a ``PATH`` that holds only
stand-ins for ``id`` and ``apt-get`` written by the test, so the machine's own chromium and
package manager are never seen nor touched. The stand-in ``apt-get`` logs its arguments and, on
``install``, puts an executable ``chromium`` on that ``PATH`` as the real package would.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "scripts" / "_chromium.sh"
BASH = shutil.which("bash") or "/bin/bash"
CHMOD = shutil.which("chmod") or "/bin/chmod"


def _write(path: Path, body: str) -> None:
    path.write_text(f"#!{BASH}\n{body}\n")
    path.chmod(0o755)


def _sandbox(tmp_path: Path, *, uid: int, apt: str | None) -> Path:
    """A bin dir with ``id`` answering ``uid`` and, unless ``apt`` is None, an ``apt-get``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _write(bin_dir / "id", f'[ "$1" = "-u" ] && echo {uid}')
    if apt == "works":
        _write(
            bin_dir / "apt-get",
            f'echo "$*" >> {tmp_path}/apt.log\n'
            f'if [ "$1" = "install" ]; then echo "#!{BASH}" > {bin_dir}/chromium; '
            f"{CHMOD} +x {bin_dir}/chromium; fi",
        )
    elif apt == "fails":
        _write(bin_dir / "apt-get", f'echo "$*" >> {tmp_path}/apt.log\nexit 100')
    return bin_dir


def _ensure(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, "-c", f"source {HELPER} && ensure_chromium"],
        env={"PATH": str(bin_dir), "HOME": str(bin_dir.parent)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _apt_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_root_with_apt_installs_debian_chromium_when_missing(tmp_path: Path) -> None:
    bin_dir = _sandbox(tmp_path, uid=0, apt="works")
    result = _ensure(bin_dir)
    assert result.returncode == 0, result.stderr
    assert _apt_calls(tmp_path) == ["update -qq", "install -y -qq chromium"]
    assert (bin_dir / "chromium").exists()
    assert "installing Debian's chromium" in result.stderr


def test_present_chromium_is_left_alone(tmp_path: Path) -> None:
    bin_dir = _sandbox(tmp_path, uid=0, apt="works")
    _write(bin_dir / "chromium", "exit 0")
    result = _ensure(bin_dir)
    assert result.returncode == 0, result.stderr
    assert _apt_calls(tmp_path) == []
    assert result.stderr == ""


@pytest.mark.parametrize(("uid", "apt"), [(1000, "works"), (0, None)])
def test_without_root_or_apt_it_stops_with_the_command_to_run(
    tmp_path: Path, uid: int, apt: str | None
) -> None:
    bin_dir = _sandbox(tmp_path, uid=uid, apt=apt)
    result = _ensure(bin_dir)
    assert result.returncode == 1
    assert "run: sudo apt-get install -y chromium" in result.stderr
    assert _apt_calls(tmp_path) == []
    assert not (bin_dir / "chromium").exists()


def test_a_failed_install_stops_with_the_command_to_run(tmp_path: Path) -> None:
    bin_dir = _sandbox(tmp_path, uid=0, apt="fails")
    result = _ensure(bin_dir)
    assert result.returncode == 1
    assert _apt_calls(tmp_path) == ["update -qq"]
    assert "installing chromium failed; run: apt-get install -y chromium" in result.stderr


def test_scripts_test_ensures_chromium_before_pytest() -> None:
    lines = (ROOT / "scripts" / "test").read_text().splitlines()
    ensure = lines.index("ensure_chromium")
    first_pytest = next(i for i, line in enumerate(lines) if line.startswith("pytest "))
    assert lines[ensure - 1] == "source scripts/_chromium.sh"
    assert ensure < first_pytest
