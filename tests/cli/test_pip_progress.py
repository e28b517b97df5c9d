"""``scripts/pip_progress.py``: pip's verbose output condensed to a line every few seconds."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pip_progress.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pip_progress", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pip_progress"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


PIP_OUTPUT = [
    (0.0, "Collecting llama-cpp-python>=0.3"),
    (1.0, "  Downloading llama_cpp_python-0.3.36.tar.gz (50.0 MB)"),
    (3.0, "Building wheels for collected packages: llama-cpp-python"),
    (4.0, "  Building wheel for llama-cpp-python (pyproject.toml): started"),
    (
        5.0,
        "  [1/193] Building C object vendor/llama.cpp/ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o",
    ),
    (9.0, "  [2/193] Building C object vendor/llama.cpp/ggml/src/CMakeFiles/ggml-base.dir/x.c.o"),
    (16.0, "  [97/193] Building CXX object vendor/llama.cpp/src/CMakeFiles/llama.dir/llama.cpp.o"),
    (130.0, "Installing collected packages: llama-cpp-python"),
    (131.0, "Successfully installed llama-cpp-python-0.3.36"),
]


def test_one_line_every_ten_seconds_with_phase_step_and_elapsed_time() -> None:
    module = load()
    now = [0.0]
    out = io.StringIO()
    reporter = module.Reporter(
        out, label="local model", every=10.0, tty=False, clock=lambda: now[0]
    )
    for at, line in PIP_OUTPUT:
        now[0] = at
        reporter.line(line + "\n")
    reporter.finish()
    assert out.getvalue().splitlines() == [
        "    local model 0m00s  collecting llama-cpp-python>=0.3",
        # 1 s .. 9 s: within ten seconds of the last line shown, nothing is printed
        "    local model 0m16s  building llama-cpp-python: compiling, step 97/193 (50%)",
        "    local model 2m10s  installing packages",
        "    local model 2m11s  installed",
    ]


def test_a_terminal_gets_the_line_redrawn_in_place() -> None:
    module = load()
    out = io.StringIO()
    reporter = module.Reporter(out, label="x", every=1.0, tty=True, clock=lambda: 0.0)
    reporter.line("Collecting a\n")
    reporter.finish()
    assert out.getvalue() == "\r\x1b[2K    x 0m00s  collecting a" * 2 + "\n"


def test_the_script_keeps_the_whole_log(tmp_path: Path) -> None:
    log = tmp_path / "pip.log"
    text = "".join(line + "\n" for _, line in PIP_OUTPUT)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--log", str(log), "--label", "model"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert log.read_text() == text
    assert done.stderr.splitlines()[-1].endswith("installed")
