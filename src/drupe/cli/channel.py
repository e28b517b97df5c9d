"""``drupe channel``: the IM channels of a running Drupe server (``/api/channels``).

Commands: ``list`` (each channel's type, state, target, active chats, last error), ``show ID``
(one channel with its bound chats and allow-lists), ``send ID CHAT TEXT`` (deliver a message
to a chat through the channel's outbox: at most once per ``--delivery-id``) and ``check``
(validate the ``[channels.*]`` tables of a config file without starting anything). Channels
are configured in ``config.toml``; secrets stay in the environment and are never printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from drupe.cli.agent import DEFAULT_URL, Url, _call, _fail

__all__ = ["channel_app"]

channel_app = typer.Typer(help="IM channels (Telegram, Slack, webhook).", no_args_is_help=True)
_console = Console(highlight=False)


@channel_app.command("list")
def list_channels(url: Url = DEFAULT_URL) -> None:
    """List the configured channels and their state."""
    channels: list[dict[str, Any]] = _call(url, "GET", "/api/channels")
    if not channels:
        _console.print("No channels: add a [channels.<id>] table to config.toml.")
        return
    table = Table("id", "type", "state", "target", "chats", "last error")
    for ch in channels:
        table.add_row(
            ch["id"],
            ch["type"],
            ch["state"],
            ch["target"],
            str(len(ch.get("chats", []))),
            escape(ch.get("lastError") or ""),
        )
    _console.print(table)


@channel_app.command("show")
def show(
    channel_id: Annotated[str, typer.Argument(help="The channel id.")], url: Url = DEFAULT_URL
) -> None:
    """One channel: configuration (env var names only), state and bound chats."""
    ch: dict[str, Any] = _call(url, "GET", f"/api/channels/{channel_id}")
    for key in ("id", "type", "state", "target", "mode", "debounce", "rateLimit", "lastError"):
        _console.print(f"{key}: {escape(str(ch.get(key)))}")
    _console.print(f"allowed users: {', '.join(ch.get('allowedUsers', [])) or '(none)'}")
    _console.print(f"allowed chats: {', '.join(ch.get('allowedChats', [])) or '(none)'}")
    for chat in ch.get("chats", []):
        _console.print(f"  chat {chat['chatId']} -> {chat['conversationId']} ({chat['target']})")


@channel_app.command("send")
def send(
    channel_id: Annotated[str, typer.Argument(help="The channel id.")],
    chat_id: Annotated[str, typer.Argument(help="The chat id (see `drupe channel show`).")],
    text: Annotated[str, typer.Argument(help="The message.")],
    delivery_id: Annotated[
        str | None, typer.Option(help="Send at most once per id (retries are safe).")
    ] = None,
    url: Url = DEFAULT_URL,
) -> None:
    """Deliver a message to one chat."""
    body: dict[str, Any] = {"text": text}
    if delivery_id:
        body["deliveryId"] = delivery_id
    result = _call(url, "POST", f"/api/channels/{channel_id}/chats/{chat_id}/messages", body)
    _console.print(f"queued (delivery {result['deliveryId']})")


@channel_app.command("check")
def check(
    config: Annotated[
        Path | None, typer.Option(help="The config file (default: $DRUPE_CONFIG or the user's).")
    ] = None,
) -> None:
    """Validate the \\[channels.*] tables: every problem is listed (their env vars, targets)."""
    from drupe.agent.models.config import config_path, load_model_config
    from drupe.agent.models.registry import ModelRegistry
    from drupe.channels.config import check_channel_configs
    from drupe.errors import ConfigError

    path = config or config_path()
    try:
        models = ModelRegistry(load_model_config(path))
    except ConfigError as err:
        raise _fail(str(err)) from err
    channels, problems = check_channel_configs(path, models.resolve)
    if not channels and not problems:
        _console.print(f"{path}: no \\[channels.<id>] tables", markup=True)
        return
    for ch in channels:
        _console.print(f"ok  {ch.id} ({ch.type}) -> {ch.target}", markup=False)
    for problem in problems:
        _console.print(f"error  {problem}", markup=False)
    if problems:
        raise typer.Exit(1)
