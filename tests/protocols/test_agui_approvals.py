"""AG-UI approvals: a run ends with an ``interrupt`` outcome; the next run's ``resume`` answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from drupe.agent.models.scripted import Text, ToolCall, register_script
from drupe.app import Runtime
from drupe.tools.base import ToolContext, ToolEntry
from tests.protocols.agui_sse import parse, run_input, target, text_of

GATED = 'scripted:tool?tool=delete_file&args={"path":"notes.txt"}'


def register_gated_tool(runtime: Runtime, calls: list[Mapping[str, Any]]) -> None:
    async def delete_file(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        calls.append(dict(arguments))
        return {"deleted": arguments["path"]}

    runtime.tools.register(
        ToolEntry(
            name="delete_file",
            description="Delete a file.",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            execute=delete_file,
            needs_approval=lambda arguments: True,
            defer="never",
        )
    )


async def test_an_approval_is_an_interrupt_and_resume_continues_the_answer(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    calls: list[Mapping[str, Any]] = []
    register_gated_tool(runtime, calls)
    first = parse((await http.post(target(GATED), json=run_input("th-ap", "clean up"))).text)
    end = first[-1]
    assert end["type"] == "RUN_FINISHED" and end["outcome"]["type"] == "interrupt", first
    (interrupt,) = end["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    call_id = next(e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START")
    assert interrupt["toolCallId"] == call_id
    assert calls == []  # nothing ran before the approval

    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": True}]
    body = {**run_input("th-ap", "unused", "run-2"), "messages": [], "resume": resume}
    second = parse((await http.post(target(GATED), json=body)).text)
    assert second[-1]["type"] == "RUN_FINISHED", second
    assert second[-1]["outcome"] == {"type": "success"}
    result = next(e for e in second if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == call_id and '"deleted": "notes.txt"' in result["content"]
    assert calls == [{"path": "notes.txt"}]
    assert text_of(second).startswith("The delete_file tool returned: ")


async def test_a_denial_continues_without_running_the_tool(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    calls: list[Mapping[str, Any]] = []
    register_gated_tool(runtime, calls)
    first = parse((await http.post(target(GATED), json=run_input("th-deny", "clean up"))).text)
    (interrupt,) = first[-1]["outcome"]["interrupts"]
    resume = [{"interruptId": interrupt["id"], "status": "cancelled"}]
    body = {**run_input("th-deny", "unused", "run-2"), "messages": [], "resume": resume}
    second = parse((await http.post(target(GATED), json=body)).text)
    assert second[-1]["type"] == "RUN_FINISHED", second
    denied = next(e for e in second if e["type"] == "TOOL_CALL_RESULT")
    assert denied["content"] == "denied"
    assert calls == []


async def test_resume_of_an_unknown_approval_is_refused(http: httpx.AsyncClient) -> None:
    await http.post(target("scripted:echo"), json=run_input("th-u", "hi"))
    resume = [{"interruptId": "nope", "status": "resolved", "payload": True}]
    body = {**run_input("th-u", "x", "run-2"), "messages": [], "resume": resume}
    response = await http.post(target("scripted:echo"), json=body)
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["type"] == "RUN_ERROR" and "asks for approval ['nope']" in error["message"]


register_script(
    "agui-two-gated",
    [
        [ToolCall("delete_file", {"path": "a.txt"}), ToolCall("delete_file", {"path": "b.txt"})],
        [Text("Both handled.")],
    ],
)


async def test_a_partial_answer_to_two_approvals_ends_interrupted_by_the_other(
    http: httpx.AsyncClient, runtime: Runtime
) -> None:
    calls: list[Mapping[str, Any]] = []
    register_gated_tool(runtime, calls)
    model = target("scripted:agui-two-gated")
    first = parse((await http.post(model, json=run_input("th-two", "clean"))).text)
    interrupts = first[-1]["outcome"]["interrupts"]
    assert len(interrupts) == 2
    resume = [{"interruptId": interrupts[0]["id"], "status": "resolved", "payload": True}]
    body = {**run_input("th-two", "x", "run-2"), "messages": [], "resume": resume}
    second = parse((await http.post(model, json=body)).text)
    assert second[-1]["outcome"]["type"] == "interrupt", second
    assert [i["id"] for i in second[-1]["outcome"]["interrupts"]] == [interrupts[1]["id"]]
    assert calls == []  # nothing runs until every approval of the step is answered
    resume = [{"interruptId": interrupts[1]["id"], "status": "resolved", "payload": False}]
    body = {**run_input("th-two", "x", "run-3"), "messages": [], "resume": resume}
    third = parse((await http.post(model, json=body)).text)
    assert third[-1]["outcome"] == {"type": "success"}, third
    assert calls == [{"path": "a.txt"}]
    assert text_of(third) == "Both handled."
