"""A tool still running shows "running", not "done", while its progress streams (issue 22).

A Drupe agent's scripted model calls ``a2a_paced``, a remote A2A agent (``a2a-sdk``'s own
server, ``tests/protocols/a2a_paced_agent.py``) that takes each step only when the test opens
its gate. While the remote works, the tool part holds preliminary outputs (its progress): the
page must label it "running" and show the progress. After the last gate the final output
arrives and the label turns "done".
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from playwright.sync_api import Page, expect

from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from tests.browser.conftest import DEFAULT_MODEL, serve
from tests.browser.test_chat_ui import assistant, send
from tests.protocols.a2a_paced_agent import STEPS, PacedAgent, paced_agent

pytestmark = pytest.mark.browser


class RemoteThread:
    """The paced remote agent on a loop of its own thread (Playwright's sync API has this one)."""

    def __init__(self) -> None:
        self.agent: PacedAgent | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: anyio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="paced-remote", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), anyio.Event()
            async with paced_agent() as agent:
                self.agent = agent
                self._ready.set()
                await self._stop.wait()

        asyncio.run(main())

    def __enter__(self) -> PacedAgent:
        self._thread.start()
        assert self._ready.wait(timeout=30) and self.agent is not None
        return self.agent

    def open_gate(self, step: int) -> None:
        assert self._loop is not None and self.agent is not None
        self._loop.call_soon_threadsafe(self.agent.gates[step].set)

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            for step in range(STEPS):  # let a task still waiting finish
                self.open_gate(step)
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=15)


@pytest.fixture
def remote() -> Iterator[RemoteThread]:
    thread = RemoteThread()
    with thread:
        yield thread


def test_a_tool_with_progress_shows_running_until_its_result(
    remote: RemoteThread, page: Page, tmp_path: Path
) -> None:
    assert remote.agent is not None
    register_script(
        "browser-a2a-progress",
        [
            [ToolCall("a2a_paced", {"message": "find sources"}, "call-paced")],
            [Text("The remote answered.")],
        ],
    )
    config = (
        f'default_model = "{DEFAULT_MODEL}"\n'
        f'[a2a.remotes.paced]\nurl = "{remote.agent.url}"\nprogress_interval_s = 0\n'
    )
    (tmp_path / "ws").mkdir()
    with serve(tmp_path, config) as drupe:
        agent = drupe.api.post(
            "/api/agents",
            json={
                "name": "Caller",
                "modelId": "scripted:browser-a2a-progress",
                "workspace": str(tmp_path / "ws"),
                "tools": ["a2a_paced"],
            },
        )
        assert agent.status_code in (200, 201), agent.text
        session = drupe.api.post(f"/api/agents/{agent.json()['id']}/sessions", json={}).json()
        page.goto(drupe.page_url(session["conversationId"]))
        expect(page.get_by_test_id("session-bar")).to_contain_text("Caller")

        send(page, "go")
        tool = page.get_by_test_id("tool-part")
        expect(tool).to_have_attribute("data-state", "output-available", timeout=20_000)
        expect(tool.locator(".tool-state")).to_have_text("running")  # "done" before the fix
        expect(tool).to_have_attribute("data-preliminary", "true")
        tool.locator("summary").click()
        expect(tool).to_contain_text("looking things up")
        remote.open_gate(0)
        expect(tool).to_contain_text("Part one.")
        expect(tool.locator(".tool-state")).to_have_text("running")  # still working remotely

        for step in range(1, STEPS):
            remote.open_gate(step)
        expect(tool.locator(".tool-state")).to_have_text("done", timeout=20_000)
        expect(tool).not_to_have_attribute("data-preliminary", "true")
        expect(tool).to_contain_text("completed")
        expect(assistant(page)).to_contain_text("The remote answered.")
