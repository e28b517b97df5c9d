"""Issue 8, points 7 and 9 over a real uvicorn server: a failed final save ends every
subscriber with an ``error`` and is counted; a stream that waits for approval resumes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import httpx

from drupe.agent.models.script import ToolCall
from drupe.agent.models.scripted import register_script
from drupe.app import Runtime
from drupe.chunks.accumulate import accumulate
from drupe.tools.base import ToolContext, ToolEntry
from tests.gateway.sse import Event, chat_body, chunks, iter_events, parse_events

PACED = "scripted:lorem?words=80&rate=200"
SAVE_FAILED = "the answer could not be saved"


def _metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(name + " "))
    return float(line.split()[1])


async def test_a_failed_final_save_ends_subscribers_with_an_error_and_is_counted(
    server: Any, runtime: Runtime
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        before = _metric((await http.get("/metrics")).text, "drupe_save_failures_total")
        seen: list[Event] = []
        body = chat_body("c-nosave", "x", models=[PACED])
        with anyio.fail_after(15):  # before the fix the response never ended (pings forever)
            async with http.stream("POST", "/api/chat", json=body) as response:
                async for event in iter_events(response):
                    seen.append(event)
                    if len(seen) == 1:
                        # The placeholder row disappears under the stream: its final write fails.
                        assert await runtime.db.messages.delete([event.json["messageId"]]) == 1
        # The response ENDED (the loop above returned): an error chunk, then [DONE].
        assert seen[-1].data == "[DONE]"
        assert chunks(seen)[-1] == {"type": "error", "errorText": SAVE_FAILED}
        after = _metric((await http.get("/metrics")).text, "drupe_save_failures_total")
        assert after == before + 1
        # The message is still readable in memory for the grace period.
        resumed = await http.get("/api/chat/c-nosave/stream")
    assert resumed.status_code == 200
    replay = parse_events(resumed.text)
    assert chunks(replay)[-1] == {"type": "error", "errorText": SAVE_FAILED}
    text = "".join(p.get("text", "") for p in accumulate(chunks(replay))["parts"])
    assert len(text.split()) == 80
    assert accumulate(chunks(replay))["parts"] == accumulate(chunks(seen))["parts"]


async def test_a_stream_waiting_for_approval_can_be_attached_over_http(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    async def remove(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return "removed"

    register_script("gw-resume-approve", [[ToolCall("rm2", {"path": "/x"}, tool_call_id="c1")]])
    runtime.tools.register(
        ToolEntry(
            name="rm2",
            description="Remove a file",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            execute=remove,
            needs_approval=lambda args: True,
        )
    )
    body = chat_body("c-wait", "clean", models=["scripted:gw-resume-approve"])
    first = parse_events((await http.post("/api/chat", json=body)).text)
    assert runtime.manager.status("c-wait").status == "awaiting-approval"  # type: ignore[union-attr]
    resumed = await http.get("/api/chat/c-wait/stream")
    assert resumed.status_code == 200
    replay = parse_events(resumed.text)
    assert replay[-1].data == "[DONE]"
    request = next(c for c in chunks(replay) if c["type"] == "tool-approval-request")
    assert request["toolCallId"] == "c1"
    assert accumulate(chunks(replay))["parts"] == accumulate(chunks(first))["parts"]
