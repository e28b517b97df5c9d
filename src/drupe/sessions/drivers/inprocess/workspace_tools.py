"""The in-process agent's workspace tools: files confined to one directory, and an opt-in shell.

``workspace_tools(root, ...)`` builds the ``ToolEntry`` list the in-process driver hands the
agent loop: ``read_file``, ``write_file``, ``list_dir`` and ``search_files`` (a regex grep), plus
``shell`` only when the agent's settings enable it.

Confinement rules (``confine``): a path argument is taken relative to the workspace (an absolute
path is accepted only when it lies inside it), resolved with every symlink followed, and refused
with a ``ToolError`` when the result leaves the workspace: ``..`` escapes and symlinks pointing
outside are both caught this way. ``search_files`` and ``list_dir`` never descend into (or read
through) a link that leaves the workspace.

The ``shell`` tool is not a sandbox: the command runs with the server user's rights, with
``cwd`` = the workspace, a minimal environment, a wall-clock timeout after which its whole
process group is killed, and bounded output. It is therefore off by default and, when on,
approval-gated unless the permission mode is ``bypass``.

Must never: read or write outside the workspace through the file tools, or run a command when
the shell is off.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from drupe.errors import ToolError
from drupe.tools.base import ToolContext, ToolEntry
from drupe.tools.process_run import run_bounded

__all__ = [
    "READ_ONLY_TOOLS",
    "ShellResult",
    "WorkspaceToolOptions",
    "confine",
    "run_shell",
    "workspace_tools",
]

READ_ONLY_TOOLS = frozenset(("read_file", "list_dir", "search_files"))
_MAX_READ_BYTES = 256_000
_MAX_LIST_ENTRIES = 1_000
_MAX_MATCHES = 200
_MAX_SEARCH_FILE_BYTES = 2_000_000
_MAX_SHELL_OUTPUT = 64_000


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceToolOptions:
    """Which tools to build and how the shell behaves."""

    shell: bool = False
    """Offer ``shell``. Off by default: it runs with the server's rights."""
    shell_needs_approval: bool = True
    shell_timeout_s: float = 30.0
    read_only: bool = False
    """Only the reading tools (permission mode ``plan``)."""


def confine(root: Path, raw: object) -> Path:
    """Resolve the path argument ``raw`` inside ``root``; raise ``ToolError`` if it escapes."""
    if not isinstance(raw, str):
        raise ToolError("argument 'path' must be a string")
    base = root.resolve()
    candidate = Path(raw) if raw else Path(".")
    resolved = (candidate if candidate.is_absolute() else base / candidate).resolve()
    if resolved != base and not resolved.is_relative_to(base):
        raise ToolError(f"path {raw!r} is outside the workspace; use a path inside it")
    return resolved


def _relative(root: Path, path: Path) -> str:
    relative = path.relative_to(root.resolve())
    return relative.as_posix() if relative.parts else "."


def _inside(root: Path, path: Path) -> bool:
    base = root.resolve()
    try:
        resolved = path.resolve()
    except OSError:
        return False
    return resolved == base or resolved.is_relative_to(base)


# --- the file tools (blocking; run in a worker thread) ----------------------------------------


def _read_file(root: Path, arguments: Mapping[str, Any]) -> dict[str, Any]:
    path = confine(root, arguments.get("path", ""))
    if not path.is_file():
        raise ToolError(f"{arguments.get('path')!r} is not a file in the workspace")
    data = path.read_bytes()
    truncated = len(data) > _MAX_READ_BYTES
    text = data[:_MAX_READ_BYTES].decode("utf-8", errors="replace")
    return {"path": _relative(root, path), "content": text, "truncated": truncated}


def _write_file(root: Path, arguments: Mapping[str, Any]) -> dict[str, Any]:
    path = confine(root, arguments.get("path", ""))
    content = arguments.get("content")
    if not isinstance(content, str):
        raise ToolError("argument 'content' must be a string")
    if path == root.resolve() or path.is_dir():
        raise ToolError(f"{arguments.get('path')!r} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    path.write_bytes(data)
    return {"path": _relative(root, path), "bytes": len(data)}


def _list_dir(root: Path, arguments: Mapping[str, Any]) -> dict[str, Any]:
    path = confine(root, arguments.get("path", "."))
    if not path.is_dir():
        raise ToolError(f"{arguments.get('path')!r} is not a directory in the workspace")
    entries: list[dict[str, Any]] = []
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if len(entries) >= _MAX_LIST_ENTRIES:
            break
        if child.is_symlink() and not _inside(root, child):
            kind = "link-outside"
        elif child.is_dir():
            kind = "dir"
        else:
            kind = "file"
        entry: dict[str, Any] = {"name": child.name, "type": kind}
        if kind == "file":
            entry["size"] = child.stat().st_size
        entries.append(entry)
    return {"path": _relative(root, path), "entries": entries}


def _search_files(root: Path, arguments: Mapping[str, Any]) -> dict[str, Any]:
    pattern = arguments.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ToolError("argument 'pattern' must be a non-empty regular expression")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from exc
    start = confine(root, arguments.get("path", "."))
    glob = arguments.get("glob")
    matches: list[dict[str, Any]] = []
    files = [start] if start.is_file() else sorted(_walk(root, start))
    for file in files:
        if isinstance(glob, str) and glob and not file.match(glob):
            continue
        try:
            if file.stat().st_size > _MAX_SEARCH_FILE_BYTES:
                continue
            data = file.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:4096]:
            continue  # binary
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                matches.append({"path": _relative(root, file), "line": number, "text": line[:500]})
                if len(matches) >= _MAX_MATCHES:
                    return {"matches": matches, "truncated": True}
    return {"matches": matches, "truncated": False}


def _walk(root: Path, start: Path) -> list[Path]:
    found: list[Path] = []
    for directory, dirnames, filenames in os.walk(start):
        here = Path(directory)
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and _inside(root, here / d))
        found.extend(here / f for f in filenames if _inside(root, here / f))
    return found


# --- the shell ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShellResult:
    exit_code: int | None
    """``None`` when the command was killed at the timeout."""
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool


async def run_shell(command: str, *, cwd: Path, timeout_s: float) -> ShellResult:
    """Run ``command`` with ``/bin/sh -c`` in ``cwd``; kill its process group at the timeout."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
    }
    outcome = await run_bounded(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env,
        timeout_s=timeout_s,
        max_output_bytes=_MAX_SHELL_OUTPUT,
    )
    return ShellResult(**asdict(outcome))


# --- entries -----------------------------------------------------------------------------------

_PATH = {"type": "string", "description": "A path relative to the workspace root"}


def _file_entry(
    root: Path,
    name: str,
    description: str,
    properties: Mapping[str, Any],
    required: list[str],
    run: Callable[[Path, Mapping[str, Any]], dict[str, Any]],
) -> ToolEntry:
    async def execute(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        return await anyio.to_thread.run_sync(run, root, arguments)

    return ToolEntry(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": dict(properties), "required": required},
        execute=execute,
        namespace="workspace",
        defer="never",
    )


def workspace_tools(root: Path, options: WorkspaceToolOptions | None = None) -> list[ToolEntry]:
    """The tool entries of a workspace rooted at ``root`` (see the module docstring)."""
    opts = options or WorkspaceToolOptions()
    entries = [
        _file_entry(
            root,
            "read_file",
            "Read a UTF-8 text file of the workspace.",
            {"path": _PATH},
            ["path"],
            _read_file,
        ),
        _file_entry(
            root,
            "list_dir",
            "List a directory of the workspace (names, types, file sizes).",
            {"path": _PATH},
            [],
            _list_dir,
        ),
        _file_entry(
            root,
            "search_files",
            "Search the workspace's text files for a regular expression; returns matching "
            "lines with their path and line number.",
            {
                "pattern": {"type": "string", "description": "A Python regular expression"},
                "path": _PATH,
                "glob": {"type": "string", "description": "Only files matching, e.g. *.py"},
            },
            ["pattern"],
            _search_files,
        ),
    ]
    if opts.read_only:
        return entries
    entries.append(
        _file_entry(
            root,
            "write_file",
            "Create or overwrite a text file of the workspace (parent directories are created).",
            {"path": _PATH, "content": {"type": "string"}},
            ["path", "content"],
            _write_file,
        )
    )
    if opts.shell:
        entries.append(_shell_entry(root, opts))
    return entries


def _shell_entry(root: Path, opts: WorkspaceToolOptions) -> ToolEntry:
    cwd = root.resolve()

    async def execute(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("argument 'command' must be a non-empty shell command")
        result = await run_shell(command, cwd=cwd, timeout_s=opts.shell_timeout_s)
        return asdict(result)

    return ToolEntry(
        name="shell",
        description=(
            "Run a shell command (/bin/sh -c) in the workspace directory and return its exit "
            f"code, stdout and stderr. It is killed after {opts.shell_timeout_s:g} seconds."
        ),
        input_schema={
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
        execute=execute,
        namespace="workspace",
        defer="never",
        needs_approval=(lambda _arguments: True) if opts.shell_needs_approval else None,
    )
