"""AG-UI client-side tools: a call ends the run; the client's result continues in a new run."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.protocols.agui_sse import parse, run_input, target, text_of

PICKER = 'scripted:tool?tool=pick_color&args={"options":["red","blue"]}'
TOOL = {
    "name": "pick_color",
    "description": "Ask the user to pick a colour.",
    "parameters": {"type": "object", "properties": {"options": {"type": "array"}}},
}


async def test_a_client_tool_call_ends_the_run_and_its_result_continues_it(
    http: httpx.AsyncClient,
) -> None:
    first = parse(
        (await http.post(target(PICKER), json=run_input("th-ct", "pick one", tools=[TOOL]))).text
    )
    end = first[-1]
    assert end["type"] == "RUN_FINISHED", first
    start = next(e for e in first if e["type"] == "TOOL_CALL_START")
    assert start["toolCallName"] == "pick_color"
    call = start["toolCallId"]
    assert end["outcome"] == {"type": "success", "pendingToolCallIds": [call]}
    args = "".join(e["delta"] for e in first if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"options": ["red", "blue"]}
    assert not [e for e in first if e["type"] == "TOOL_CALL_RESULT"]

    messages: list[dict[str, Any]] = [
        {"id": "u-run-1", "role": "user", "content": "pick one"},
        {
            "id": start.get("parentMessageId", "a1"),
            "role": "assistant",
            "toolCalls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": "pick_color", "arguments": args},
                }
            ],
        },
        {"id": "t1", "role": "tool", "toolCallId": call, "content": "blue"},
    ]
    body = {**run_input("th-ct", "unused", "run-2", tools=[TOOL]), "messages": messages}
    second = parse((await http.post(target(PICKER), json=body)).text)
    assert second[-1]["type"] == "RUN_FINISHED", second
    assert second[-1]["outcome"] == {"type": "success"}
    assert not [e for e in second if e["type"] == "TOOL_CALL_RESULT"]  # the client has it
    assert "blue" in text_of(second)
    detail = (await http.get("/api/conversations/th-ct")).json()
    part = next(p for p in detail["messages"][-1]["parts"] if p["type"] == "tool-pick_color")
    assert (part["state"], part["output"]) == ("output-available", "blue")


async def test_a_result_for_no_pending_call_is_refused(http: httpx.AsyncClient) -> None:
    await http.post(target("scripted:echo"), json=run_input("th-nc", "hi"))
    body = {
        **run_input("th-nc", "x", "run-2"),
        "messages": [{"id": "t", "role": "tool", "toolCallId": "call_nope", "content": "x"}],
    }
    response = await http.post(target("scripted:echo"), json=body)
    assert response.status_code == 409
    assert "call_nope" in response.json()["message"]


async def test_client_tools_on_an_agent_target_are_refused(http: httpx.AsyncClient) -> None:
    response = await http.post("/ag-ui/agent:whoever", json=run_input("th-ag", "x", tools=[TOOL]))
    assert response.status_code == 422 and response.json()["type"] == "RUN_ERROR"
