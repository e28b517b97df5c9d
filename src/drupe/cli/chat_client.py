"""``drupe chat``: a terminal client over Drupe's public HTTP API.

It only uses the routes a browser uses: ``POST /api/chat`` (each line typed is a submit; while
an answer streams the server turns it into a steer, answered after the running turn),
``POST /api/chat/{id}/stop`` (``/stop``) and the conversation REST routes. Each submit's
answer stream is read by its own task and printed as it arrives (text plainly, reasoning dim,
tools and errors tagged). ``/quit`` leaves at once (the server keeps any live answer: a closed
connection is never a stop); end of input (Ctrl-D, or a piped file) waits for the answers.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import httpx
import orjson
from rich.console import Console

from drupe.errors import UsageError

__all__ = ["ChatClient", "render_chunk"]

HELP = "Type a message. While an answer streams, a message steers it. /stop  /quit  /help"


def render_chunk(chunk: dict[str, Any]) -> tuple[str, str | None]:
    """What to print for one UI chunk: ``(text, rich style)``; empty text prints nothing."""
    kind = chunk.get("type")
    if kind == "text-delta":
        return str(chunk.get("delta", "")), None
    if kind == "reasoning-delta":
        return str(chunk.get("delta", "")), "dim italic"
    if kind == "tool-input-start":
        return f"\n[tool {chunk.get('toolName')}] ", "cyan"
    if kind == "tool-output-available":
        return f"\n[tool result] {orjson.dumps(chunk.get('output')).decode()[:200]}\n", "cyan"
    if kind == "tool-approval-request":
        return "\n[approval requested: answer it in the web UI]\n", "yellow"
    if kind == "error":
        return f"\n[error] {chunk.get('errorText')}\n", "red"
    if kind == "abort":
        return "\n(stopped)\n", "yellow"
    if kind == "finish":
        return "\n", None
    return "", None


class ChatClient:
    """One terminal session on one conversation."""

    def __init__(
        self,
        *,
        url: str,
        conversation_id: str | None,
        models: list[str],
        console: Console | None = None,
    ) -> None:
        self.url = url
        self.conversation_id = conversation_id
        self.models = models
        self.console = console or Console(highlight=False)
        self.streaming = 0

    async def run(self) -> None:
        timeout = httpx.Timeout(10.0, read=None)
        async with httpx.AsyncClient(base_url=self.url, timeout=timeout) as http:
            await self._open(http)
            async with anyio.create_task_group() as tg:
                await self._read_input(http, tg)

    async def _open(self, http: httpx.AsyncClient) -> None:
        try:
            if self.conversation_id is None:
                r = await http.post("/api/conversations", json={})
                _check(r)
                self.conversation_id = r.json()["id"]
                self.console.print(f"new conversation [bold]{self.conversation_id}[/bold]")
            else:
                r = await http.get(f"/api/conversations/{self.conversation_id}")
                if r.status_code == 404:
                    self.console.print(f"new conversation [bold]{self.conversation_id}[/bold]")
                else:
                    _check(r)
                    self._print_history(r.json())
        except httpx.TransportError as err:
            raise UsageError(f"cannot reach Drupe at {self.url}: {err}") from err
        self.console.print(HELP, style="dim")

    def _print_history(self, detail: dict[str, Any]) -> None:
        for message in detail.get("messages", [])[-10:]:
            text = "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")
            who = "you" if message["role"] == "user" else (message.get("modelId") or "assistant")
            self.console.print(f"[bold]{who}:[/bold] {text}")

    async def _read_input(self, http: httpx.AsyncClient, tg: anyio.abc.TaskGroup) -> None:
        while True:
            try:
                line = await anyio.to_thread.run_sync(input, abandon_on_cancel=True)
            except EOFError:
                return  # the task group waits for the answers still streaming
            text = line.strip()
            if not text:
                continue
            if text == "/quit":
                tg.cancel_scope.cancel()
                return
            if text == "/help":
                self.console.print(HELP, style="dim")
            elif text == "/stop":
                r = await http.post(f"/api/chat/{self.conversation_id}/stop")
                _check(r)
                if not r.json().get("stopped"):
                    self.console.print("(nothing to stop)", style="dim")
            else:
                if self.streaming:
                    self.console.print(
                        "(steer queued: answered after the running turn)", style="dim"
                    )
                self.streaming += 1
                tg.start_soon(self._submit, http, text)

    async def _submit(self, http: httpx.AsyncClient, text: str) -> None:
        body: dict[str, Any] = {
            "id": self.conversation_id,
            "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}],
            "trigger": "submit-message",
        }
        if self.models:
            body["models"] = self.models
        try:
            async with http.stream("POST", "/api/chat", json=body) as response:
                if response.status_code != 200:
                    await response.aread()
                    _check(response)
                buffer = b""
                async for data in response.aiter_bytes():
                    buffer += data
                    while b"\n\n" in buffer:
                        block, buffer = buffer.split(b"\n\n", 1)
                        self._print_block(block)
        except UsageError as err:
            self.console.print(f"[red]error:[/red] {err}")
        finally:
            self.streaming -= 1

    def _print_block(self, block: bytes) -> None:
        for line in block.split(b"\n"):
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            text, style = render_chunk(orjson.loads(line[6:]))
            if text:
                self.console.print(text, style=style, end="", soft_wrap=True)


def _check(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text
    raise UsageError(f"HTTP {response.status_code}: {detail}")
