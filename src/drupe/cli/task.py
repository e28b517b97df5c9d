"""``drupe task``: scheduled agent tasks and background runs on a running Drupe server.

Every command is a client of the server's REST API (``/api/schedules``, ``/api/runs``): the
server owns the schedule runner, so validation (the agent, the cron expression, the time zone)
is the server's. Commands:

* ``create NAME --agent ID --prompt TEXT (--cron EXPR [--tz ZONE] | --every SECONDS | --at ISO)``
  with ``--timeout MINUTES``, ``--sticky``, ``--deliver CHANNEL:CHAT`` (repeatable),
  ``--missed skip|run-once``; prints the schedule id;
* ``list``, ``show ID`` (with its run history), ``run ID`` (run now), ``pause ID``,
  ``resume ID``, ``delete ID``;
* ``start AGENT_ID PROMPT`` (a background run; prints its run id), ``status RUN_ID``,
  ``cancel RUN_ID``.

A server error is printed as its one-line ``detail`` with exit code 1; never a traceback.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from drupe.cli.agent import DEFAULT_URL, Url, _call, _fail

__all__ = ["task_app"]

task_app = typer.Typer(
    help="Scheduled agent tasks and background runs (on a running server).", no_args_is_help=True
)

_console = Console(highlight=False)

Id = Annotated[str, typer.Argument(metavar="ID", help="The schedule's id.")]


def _trigger(cron: str | None, tz: str | None, every: int | None, at: str | None) -> dict[str, Any]:
    given = [x is not None for x in (cron, every, at)]
    if sum(given) != 1:
        raise _fail("give exactly one of --cron, --every or --at")
    if cron is not None:
        return {"kind": "cron", "expr": cron, **({"timezone": tz} if tz else {})}
    if every is not None:
        return {"kind": "interval", "seconds": every}
    return {"kind": "once", "at": at}


def _targets(items: list[str]) -> list[dict[str, str]]:
    out = []
    for item in items:
        channel, sep, chat = item.partition(":")
        if not sep or not channel or not chat:
            raise _fail(f"--deliver {item!r}: expected CHANNEL:CHAT")
        out.append({"channel": channel, "chat": chat})
    return out


def _describe(trigger: dict[str, Any]) -> str:
    if trigger.get("kind") == "cron":
        return f"cron {trigger['expr']} ({trigger.get('timezone', 'UTC')})"
    if trigger.get("kind") == "interval":
        return f"every {trigger['seconds']}s"
    return f"once at {trigger.get('at')}"


def _line(s: dict[str, Any]) -> str:
    state = "enabled" if s["enabled"] else "paused"
    return (
        f"{s['id']}  [bold]{escape(s['name'])}[/bold]  {escape(_describe(s['trigger']))}  "
        f"{state}  next: {s['nextRunAt'] or '-'}"
    )


@task_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The task's name.")],
    agent: Annotated[str, typer.Option("--agent", help="The agent's id.")],
    prompt: Annotated[str, typer.Option("--prompt", help="What the agent is asked at each fire.")],
    cron: Annotated[str | None, typer.Option(help="A 5-field cron expression.")] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="IANA time zone of --cron.")] = None,
    every: Annotated[int | None, typer.Option(help="Fire every N seconds (>= 60).")] = None,
    at: Annotated[str | None, typer.Option(help="Fire once at an ISO time with offset.")] = None,
    timeout: Annotated[int | None, typer.Option(help="Minutes (0: none; default 2).")] = None,
    sticky: Annotated[bool, typer.Option(help="Reuse one session across runs.")] = False,
    deliver: Annotated[
        list[str] | None, typer.Option(help="CHANNEL:CHAT to send results to (repeatable).")
    ] = None,
    missed: Annotated[str, typer.Option(help="After downtime: skip or run-once.")] = "skip",
    url: Url = DEFAULT_URL,
) -> None:
    """Create a scheduled task and print its id."""
    body: dict[str, Any] = {
        "agentId": agent,
        "name": name,
        "prompt": prompt,
        "trigger": _trigger(cron, tz, every, at),
        "sessionMode": "sticky" if sticky else "fresh",
        "deliverTo": _targets(deliver or []),
        "missedPolicy": missed,
    }
    if timeout is not None:
        body["timeoutMinutes"] = timeout
    schedule = _call(url, "POST", "/api/schedules", body)
    _console.print(f"created {_line(schedule)}", soft_wrap=True)
    print(schedule["id"])


@task_app.command("list")
def list_tasks(url: Url = DEFAULT_URL) -> None:
    """List scheduled tasks with their next fire time."""
    items = _call(url, "GET", "/api/schedules")["items"]
    if not items:
        _console.print("no scheduled tasks; create one with: drupe task create NAME ...")
    for s in items:
        _console.print(_line(s), soft_wrap=True)


@task_app.command("show")
def show(schedule_id: Id, url: Url = DEFAULT_URL) -> None:
    """A task and its run history (newest first)."""
    _console.print(_line(_call(url, "GET", f"/api/schedules/{schedule_id}")), soft_wrap=True)
    for r in _call(url, "GET", f"/api/schedules/{schedule_id}/runs")["items"]:
        took = f"{r['durationMs'] / 1000:.1f}s" if r["durationMs"] is not None else "-"
        detail = r["error"] or r["result"] or ""
        _console.print(
            f"  {r['startedAt']}  {r['status']}  {took}  {escape(detail[:80])}", soft_wrap=True
        )


@task_app.command("run")
def run_now(schedule_id: Id, url: Url = DEFAULT_URL) -> None:
    """Run the task now; print the run id."""
    print(_call(url, "POST", f"/api/schedules/{schedule_id}/run")["id"])


@task_app.command("pause")
def pause(schedule_id: Id, url: Url = DEFAULT_URL) -> None:
    """Pause the task (no fires until resumed)."""
    _console.print(_line(_call(url, "POST", f"/api/schedules/{schedule_id}/pause")))


@task_app.command("resume")
def resume(schedule_id: Id, url: Url = DEFAULT_URL) -> None:
    """Resume the task (its next fire is computed from now)."""
    _console.print(_line(_call(url, "POST", f"/api/schedules/{schedule_id}/resume")))


@task_app.command("delete")
def delete(schedule_id: Id, url: Url = DEFAULT_URL) -> None:
    """Delete the task (its run history is kept)."""
    _call(url, "DELETE", f"/api/schedules/{schedule_id}")
    _console.print(f"deleted {escape(schedule_id)}")


@task_app.command("start")
def start(
    agent_id: Annotated[str, typer.Argument(metavar="AGENT_ID", help="The agent's id.")],
    prompt: Annotated[str, typer.Argument(help="What to ask.")],
    url: Url = DEFAULT_URL,
) -> None:
    """Start a background run of the agent; print its run id."""
    run = _call(url, "POST", f"/api/agents/{agent_id}/runs", {"prompt": prompt})
    _console.print(
        f"watch it: drupe chat {run['conversationId']} (or GET /api/runs/{run['id']})",
        soft_wrap=True,
    )
    print(run["id"])


@task_app.command("status")
def status(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")], url: Url = DEFAULT_URL
) -> None:
    """A run's status and result."""
    run = _call(url, "GET", f"/api/runs/{run_id}")
    _console.print(f"{run['status']}  {escape(run['error'] or '')}", soft_wrap=True)
    if run["result"]:
        print(run["result"])


@task_app.command("cancel")
def cancel(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")], url: Url = DEFAULT_URL
) -> None:
    """Cancel a running run (its partial answer is kept)."""
    answer = _call(url, "POST", f"/api/runs/{run_id}/cancel")
    _console.print(
        "cancelled" if answer["cancelled"] else f"not running ({answer['run']['status']})"
    )
