"""Workspace tools on their own: confinement, listing and search through links, the shell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drupe.errors import ToolError
from drupe.sessions.drivers.base import ConnectTarget
from drupe.sessions.drivers.inprocess.driver import session_tools
from drupe.sessions.drivers.inprocess.workspace_tools import (
    WorkspaceToolOptions,
    confine,
    run_shell,
    workspace_tools,
)
from drupe.tools.base import ToolContext, ToolEntry

_CTX = ToolContext(conversation_id="agent-session:s1", tool_call_id="c1")


def _by_name(entries: list[ToolEntry]) -> dict[str, ToolEntry]:
    return {entry.name: entry for entry in entries}


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 42\n")
    (root / "README.md").write_text("main entry point\n")
    (root / "blob.bin").write_bytes(b"main\0\0binary")
    (outside / "leak.py").write_text("def main(): secret\n")
    (root / "out").symlink_to(outside)
    (root / "src" / "inner").symlink_to(root / "src")  # a link inside is fine
    return root, outside


@pytest.mark.parametrize(
    "raw",
    ["..", "../outside/leak.py", "src/../../outside", "out", "out/leak.py", "/etc/passwd"],
)
def test_confine_refuses_escapes(layout: tuple[Path, Path], raw: str) -> None:
    root, _ = layout
    with pytest.raises(ToolError, match="outside the workspace"):
        confine(root, raw)


def test_confine_accepts_paths_inside(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    resolved = root.resolve()
    assert confine(root, "") == resolved
    assert confine(root, ".") == resolved
    assert confine(root, "src/./app.py") == resolved / "src" / "app.py"
    assert confine(root, str(resolved / "README.md")) == resolved / "README.md"
    assert confine(root, "src/inner/app.py") == resolved / "src" / "app.py"
    assert confine(root, "new/dir/file.txt") == resolved / "new" / "dir" / "file.txt"
    with pytest.raises(ToolError):
        confine(root, 3)


async def test_search_and_list_never_read_through_links_outside(
    layout: tuple[Path, Path],
) -> None:
    root, _ = layout
    tools = _by_name(workspace_tools(root))
    found: dict[str, Any] = await tools["search_files"].execute({"pattern": r"def main"}, _CTX)
    assert [m["path"] for m in found["matches"]] == ["src/app.py"]
    everything = await tools["search_files"].execute({"pattern": "main"}, _CTX)
    assert sorted({m["path"] for m in everything["matches"]}) == ["README.md", "src/app.py"]
    only_md = await tools["search_files"].execute({"pattern": "main", "glob": "*.md"}, _CTX)
    assert [m["path"] for m in only_md["matches"]] == ["README.md"]
    listing = await tools["list_dir"].execute({}, _CTX)
    assert {e["name"]: e["type"] for e in listing["entries"]} == {
        "README.md": "file",
        "blob.bin": "file",
        "out": "link-outside",
        "src": "dir",
    }
    with pytest.raises(ToolError, match="invalid regular expression"):
        await tools["search_files"].execute({"pattern": "("}, _CTX)
    with pytest.raises(ToolError, match="not a file"):
        await tools["read_file"].execute({"path": "src"}, _CTX)
    with pytest.raises(ToolError, match="is a directory"):
        await tools["write_file"].execute({"path": "src", "content": "x"}, _CTX)


def test_tool_selection_by_settings_mode_and_names(tmp_path: Path) -> None:
    plain = ConnectTarget(model_id="m")
    assert [e.name for e in session_tools(tmp_path, {}, plain)] == [
        "read_file",
        "list_dir",
        "search_files",
        "write_file",
    ]
    with_shell = _by_name(session_tools(tmp_path, {"shell": True}, plain))
    assert with_shell["shell"].is_approval_gated({"command": "ls"})
    bypass = ConnectTarget(model_id="m", permission_mode="bypass")
    assert not _by_name(session_tools(tmp_path, {"shell": True}, bypass))["shell"].needs_approval
    plan = ConnectTarget(model_id="m", permission_mode="plan")
    assert [e.name for e in session_tools(tmp_path, {"shell": True}, plan)] == [
        "read_file",
        "list_dir",
        "search_files",
    ]
    chosen = ConnectTarget(model_id="m", tools=("read_file", "shell"))
    assert [e.name for e in session_tools(tmp_path, {}, chosen)] == ["read_file"]


async def test_the_shell_times_out_and_kills_its_process_group(tmp_path: Path) -> None:
    result = await run_shell("sleep 5 & sleep 5; echo never", cwd=tmp_path, timeout_s=0.3)
    assert result.timed_out and result.exit_code is None and "never" not in result.stdout
    here = await run_shell("pwd; echo oops >&2; exit 3", cwd=tmp_path, timeout_s=5)
    assert (here.exit_code, here.stdout, here.stderr) == (3, f"{tmp_path}\n", "oops\n")
    entry = _by_name(workspace_tools(tmp_path, WorkspaceToolOptions(shell=True)))["shell"]
    with pytest.raises(ToolError):
        await entry.execute({"command": "  "}, _CTX)
