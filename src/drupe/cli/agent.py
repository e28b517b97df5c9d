"""``drupe agent``: manage agents and open agent sessions on a running Drupe server.

Every command is a client of the server's REST API (``/api/agents``, ``/api/sessions``): the
server owns live sessions, so deleting an agent stops its live turns first and validation
(driver types, model ids, workspaces) is the server's, one rule for every surface. Commands:
``create NAME``, ``list``, ``delete ID``, ``session ID`` (prints the new session's conversation
id; ``drupe chat agent-session:<sid>`` chats with it) and ``sessions ID``.

A relative ``--workspace`` is made absolute here (the server wants absolute paths). A server
error is printed as its one-line ``detail`` with exit code 1; never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["agent_app"]

agent_app = typer.Typer(
    help="Agents and agent sessions (on a running server).", no_args_is_help=True
)

_console = Console(highlight=False)
_errors = Console(stderr=True, highlight=False)

Url = Annotated[str, typer.Option(help="The Drupe server.")]
DEFAULT_URL = "http://127.0.0.1:8787"


def _fail(message: str) -> typer.Exit:
    _errors.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    return typer.Exit(1)


def _call(url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One request; the JSON answer, or a clean exit with the server's ``detail``."""
    import httpx  # only when a command runs: keeps `drupe --help` fast

    base = url.rstrip("/")
    try:
        response = httpx.request(method, f"{base}{path}", json=body, timeout=30.0)
    except httpx.TransportError as err:
        raise _fail(f"cannot reach Drupe at {base}: {err} (is `drupe serve` running?)") from err
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        raise _fail(f"HTTP {response.status_code}: {detail}")
    return response.json() if response.content else None


@agent_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The agent's name.")],
    driver: Annotated[
        str, typer.Option("--driver", help="Driver type (see GET /api/drivers).")
    ] = "inprocess",
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model id (default: the server's).")
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(help="An existing directory (default: one in the server's data dir)."),
    ] = None,
    instructions: Annotated[str | None, typer.Option(help="System instructions.")] = None,
    permission_mode: Annotated[
        str, typer.Option("--permission-mode", help="default, accept-edits, plan or bypass.")
    ] = "default",
    url: Url = DEFAULT_URL,
) -> None:
    """Create an agent and print its id."""
    body: dict[str, Any] = {"name": name, "driverType": driver, "permissionMode": permission_mode}
    if model is not None:
        body["modelId"] = model
    if workspace is not None:
        body["workspace"] = str(workspace.expanduser().resolve())
    if instructions is not None:
        body["instructions"] = instructions
    agent = _call(url, "POST", "/api/agents", body)
    _console.print(
        f"created agent [bold]{escape(agent['name'])}[/bold] "
        f"({agent['driverType']}, {escape(agent['modelId'] or 'no model')}) "
        f"in {escape(agent['workspace'] or '-')}",
        soft_wrap=True,
    )
    print(agent["id"])


@agent_app.command("list")
def list_agents(url: Url = DEFAULT_URL) -> None:
    """List agents."""
    agents = _call(url, "GET", "/api/agents")["items"]
    if not agents:
        _console.print("no agents; create one with: drupe agent create NAME")
        return
    for a in agents:
        _console.print(
            f"{a['id']}  [bold]{escape(a['name'])}[/bold]  {a['driverType']}  "
            f"{escape(a['modelId'] or 'no model')}  {escape(a['workspace'] or '-')}",
            soft_wrap=True,
        )


@agent_app.command("delete")
def delete(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The agent's id.")],
    url: Url = DEFAULT_URL,
) -> None:
    """Delete an agent with its sessions (live turns are stopped first)."""
    _call(url, "DELETE", f"/api/agents/{agent_id}")
    _console.print(f"deleted agent {escape(agent_id)}")


@agent_app.command("session")
def new_session(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The agent's id.")],
    title: Annotated[str | None, typer.Option(help="The session's title.")] = None,
    url: Url = DEFAULT_URL,
) -> None:
    """Create a session of the agent and print its conversation id."""
    body: dict[str, Any] = {} if title is None else {"title": title}
    session = _call(url, "POST", f"/api/agents/{agent_id}/sessions", body)
    conversation_id = session["conversationId"]
    chat = f"drupe chat {conversation_id}"
    if url.rstrip("/") != DEFAULT_URL:
        chat += f" --url {url.rstrip('/')}"
    _console.print(f"created session {session['id']}; chat with it: {escape(chat)}", soft_wrap=True)
    print(conversation_id)


@agent_app.command("sessions")
def list_sessions(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The agent's id.")],
    url: Url = DEFAULT_URL,
) -> None:
    """List the agent's sessions with their status."""
    sessions = _call(url, "GET", f"/api/agents/{agent_id}/sessions")["items"]
    if not sessions:
        _console.print(
            f"no sessions; create one with: drupe agent session {escape(agent_id)}", soft_wrap=True
        )
        return
    for s in sessions:
        runtime = s["runtime"]
        state = "compacting" if runtime["compacting"] else ("busy" if runtime["busy"] else "idle")
        _console.print(
            f"{s['conversationId']}  {escape(s['title'] or '(untitled)')}  {s['status']}  {state}",
            soft_wrap=True,
        )
