"""``drupe chat``: a terminal client over Drupe's public HTTP API.

It only uses the routes a browser uses: ``POST /api/chat`` (each line typed is a submit; while
an answer streams the server turns it into a steer, answered after the running turn),
``POST /api/chat/{id}/stop`` (``/stop``), ``GET /api/models`` (which model answers) and the
conversation REST routes. Each submit's answer stream is read by its own task and folded by an
:class:`~drupe.cli.chat_view.AnswerView` into whole lines, which the terminal
(``drupe.cli.chat_terminal``) prints under a label naming the model; the model, steers and
stops are shown as status lines. ``/quit`` (or Ctrl-C) leaves at once (the server keeps any
live answer: a closed connection is never a stop); end of input (Ctrl-D, or a piped file) waits
for the answers.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import httpx
import orjson

from drupe.cli.chat_terminal import Terminal, open_terminal
from drupe.cli.chat_view import AnswerView, Line, status_line
from drupe.errors import UsageError

__all__ = ["HELP", "ChatClient"]

HELP = "type a message; while an answer streams, a message steers it. /stop  /quit  /help"
_HISTORY = 10


class ChatClient:
    """One terminal session on one conversation."""

    def __init__(
        self,
        *,
        url: str,
        conversation_id: str | None,
        models: list[str],
        terminal: Terminal | None = None,
    ) -> None:
        self.url = url
        self.conversation_id = conversation_id
        self.models = models
        self.terminal = terminal or open_terminal()
        self.model_label = ", ".join(models)
        self.streaming = 0
        self._last_speaker: AnswerView | None = None
        """The answer that printed the last lines (other lines in between reset it)."""

    async def run(self) -> None:
        timeout = httpx.Timeout(10.0, read=None)
        async with httpx.AsyncClient(base_url=self.url, timeout=timeout) as http:
            await self._open(http)
            async with anyio.create_task_group() as tg:
                await self._read_input(http, tg)

    async def _open(self, http: httpx.AsyncClient) -> None:
        lines: list[Line] = []
        try:
            if not self.models:
                r = await http.get("/api/models")
                _check(r)
                self.model_label = str(r.json().get("default") or "the default model")
            if self.conversation_id is None:
                r = await http.post("/api/conversations", json={})
                _check(r)
                self.conversation_id = r.json()["id"]
                lines.append(status_line(f"new conversation {self.conversation_id}"))
            else:
                r = await http.get(f"/api/conversations/{self.conversation_id}")
                if r.status_code == 404:
                    lines.append(status_line(f"new conversation {self.conversation_id}"))
                else:
                    _check(r)
                    lines.append(status_line(f"conversation {self.conversation_id}"))
                    lines.extend(_history(r.json()))
        except httpx.TransportError as err:
            raise UsageError(f"cannot reach Drupe at {self.url}: {err}") from err
        lines.append(status_line(f"model: {self.model_label}"))
        lines.append(status_line(HELP))
        await self.terminal.show(lines)

    async def _read_input(self, http: httpx.AsyncClient, tg: anyio.abc.TaskGroup) -> None:
        while True:
            line = await self.terminal.read_line()
            if line is None:
                return  # the task group waits for the answers still streaming
            text = line.strip()
            if not text:
                continue
            if text == "/quit":
                tg.cancel_scope.cancel()
                return
            if text == "/help":
                await self._show([status_line(HELP)])
            elif text == "/stop":
                r = await http.post(f"/api/chat/{self.conversation_id}/stop")
                _check(r)
                said = "stop sent" if r.json().get("stopped") else "nothing to stop"
                await self._show([status_line(said)])
            else:
                shown = [Line("user", text)]
                if self.streaming:
                    shown.append(status_line("steer queued: answered after the running turn"))
                await self._show(shown)
                self.streaming += 1
                self.terminal.set_status(f"{self.model_label} is answering · /stop stops it")
                tg.start_soon(self._submit, http, text)

    async def _submit(self, http: httpx.AsyncClient, text: str) -> None:
        body: dict[str, Any] = {
            "id": self.conversation_id,
            "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}],
            "trigger": "submit-message",
        }
        if self.models:
            body["models"] = self.models
        view = AnswerView(model=self.model_label)
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
                        await self._show_block(view, block)
        except UsageError as err:
            await self._show([Line("error", f"error: {err}")])
        except httpx.TransportError as err:
            await self._show([Line("error", f"connection lost: {err}")])
        finally:
            self.streaming -= 1
            self.terminal.set_partial("")
            if not self.streaming:
                self.terminal.set_status("")
            with anyio.CancelScope(shield=True):
                await self._show(view.close(), view)

    async def _show_block(self, view: AnswerView, block: bytes) -> None:
        lines: list[Line] = []
        for raw in block.split(b"\n"):
            if raw.startswith(b"data: ") and raw != b"data: [DONE]":
                lines.extend(view.feed(orjson.loads(raw[6:])))
        if lines:
            await self._show(lines, view)
        self.terminal.set_partial(view.partial)

    async def _show(self, lines: list[Line], speaker: AnswerView | None = None) -> None:
        """Print lines; an answer whose lines were interrupted by others is labelled again."""
        if not lines:
            return
        if speaker is not None and speaker is not self._last_speaker and lines[0].kind != "label":
            lines = [Line("label", speaker.model), *lines]
        self._last_speaker = speaker
        await self.terminal.show(lines)


def _history(detail: dict[str, Any]) -> list[Line]:
    lines: list[Line] = []
    for message in detail.get("messages", [])[-_HISTORY:]:
        text = "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")
        if message["role"] == "user":
            lines.append(Line("user", text))
        else:
            lines.append(Line("label", message.get("modelId") or "assistant"))
            lines.extend(Line("text", t) for t in text.split("\n"))
    return lines


def _check(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text
    raise UsageError(f"HTTP {response.status_code}: {detail}")
