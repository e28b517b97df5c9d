"""``drupe.protocols.agui.translate``: Drupe chunks -> AG-UI events, checked event by event."""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent

from drupe.protocols.agui.translate import APPROVAL_REASON, AguiRun


def _dump(events: list[BaseEvent]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in events]


def _run(chunks: list[dict[str, Any]]) -> AguiRun:
    run = AguiRun(thread_id="t1", run_id="r1")
    for chunk in chunks:
        run.feed(chunk)
    return run


def _feed_all(run: AguiRun, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[BaseEvent] = []
    for chunk in chunks:
        out += run.feed(chunk)
    return _dump(out)


def test_a_text_answer_is_one_text_message_inside_a_step() -> None:
    run = AguiRun(thread_id="t1", run_id="r1")
    started = _dump(run.started())
    assert started == [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "protocolVersion": "1.0"}
    ]
    events = _feed_all(
        run,
        [
            {"type": "start", "messageId": "m1"},
            {"type": "start-step"},
            {"type": "text-start", "id": "p0"},
            {"type": "text-delta", "id": "p0", "delta": "Hello "},
            {"type": "text-delta", "id": "p0", "delta": "world"},
            {"type": "text-end", "id": "p0"},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop"},
        ],
    )
    assert events == [
        {"type": "STEP_STARTED", "stepName": "step-1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello "},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "STEP_FINISHED", "stepName": "step-1"},
    ]
    assert _dump(run.finished("success")) == [
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1", "outcome": {"type": "success"}}
    ]
    assert run.finished("success") == [] and run.feed({"type": "text-start", "id": "x"}) == []


def test_a_second_text_part_gets_its_own_message_id() -> None:
    events = _feed_all(
        AguiRun(thread_id="t", run_id="r"),
        [
            {"type": "start", "messageId": "m1"},
            {"type": "text-start", "id": "a"},
            {"type": "text-end", "id": "a"},
            {"type": "text-start", "id": "b"},
            {"type": "text-end", "id": "b"},
        ],
    )
    assert [e.get("messageId") for e in events] == ["m1", "m1", "m1:2", "m1:2"]


def test_reasoning_is_a_reasoning_span_with_one_message() -> None:
    events = _feed_all(
        AguiRun(thread_id="t", run_id="r"),
        [
            {"type": "start", "messageId": "m1"},
            {"type": "reasoning-start", "id": "r0"},
            {"type": "reasoning-delta", "id": "r0", "delta": "hmm"},
            {"type": "reasoning-end", "id": "r0"},
        ],
    )
    assert [e["type"] for e in events] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]
    assert events[2]["delta"] == "hmm"
    assert events[1]["role"] == "reasoning"
    assert len({e["messageId"] for e in events}) == 1


def test_a_streamed_tool_call_and_its_result() -> None:
    run = AguiRun(thread_id="t", run_id="r")
    events = _feed_all(
        run,
        [
            {"type": "start", "messageId": "m1"},
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "get_weather"},
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '"Paris"}'},
            {
                "type": "tool-input-available",
                "toolCallId": "c1",
                "toolName": "get_weather",
                "input": {"city": "Paris"},
            },
            {"type": "tool-output-available", "toolCallId": "c1", "output": {"temp": 21}},
        ],
    )
    assert events == [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c1",
            "toolCallName": "get_weather",
            "parentMessageId": "m1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"city":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"Paris"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "m1:result:c1",
            "toolCallId": "c1",
            "content": '{"temp": 21}',
        },
    ]
    assert run.pending_tool_calls == []


def test_a_running_calls_progress_is_an_activity_snapshot_before_its_one_result() -> None:
    run = AguiRun(thread_id="t1", run_id="r1")
    call = {"toolCallId": "c1", "toolName": "a2a_r", "input": {"message": "go"}}
    events = _feed_all(
        run,
        [
            {"type": "start", "messageId": "m1"},
            {"type": "tool-input-available", **call},
            {"type": "tool-output-available", "toolCallId": "c1", "output": {"text": "Par"},
             "preliminary": True},
            {"type": "tool-output-available", "toolCallId": "c1", "output": {"text": "Part"}},
        ],
    )  # fmt: skip
    assert [e["type"] for e in events] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "ACTIVITY_SNAPSHOT",
        "TOOL_CALL_RESULT",
    ]
    assert events[3] == {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": "tool-progress-c1",
        "activityType": "tool-progress",
        "content": {"toolCallId": "c1", "output": {"text": "Par"}},
    }
    assert events[4]["content"] == '{"text": "Part"}'


def test_a_tool_call_given_whole_is_started_with_its_arguments_and_left_pending() -> None:
    run = AguiRun(thread_id="t", run_id="r")
    events = _feed_all(
        run,
        [
            {
                "type": "tool-input-available",
                "toolCallId": "c9",
                "toolName": "pick",
                "input": {"n": 1},
            }
        ],
    )
    assert [e["type"] for e in events] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert events[1]["delta"] == '{"n": 1}'
    assert events[0]["parentMessageId"] == "r"  # no start chunk: the run id owns it
    end = _dump(run.finished("success"))
    assert end[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c9"]}


def test_a_stop_mid_part_closes_everything_then_ends_cancelled() -> None:
    run = _run(
        [
            {"type": "start", "messageId": "m1"},
            {"type": "start-step"},
            {"type": "reasoning-start", "id": "r0"},
            {"type": "text-start", "id": "p0"},
            {"type": "text-delta", "id": "p0", "delta": "Hel"},
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "x"},
            {"type": "abort", "reason": "user-stop"},
        ]
    )
    events = _dump(run.finished("paused", reason="user-stop"))
    assert [e["type"] for e in events] == [
        "TEXT_MESSAGE_END",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TOOL_CALL_END",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert events[-1]["result"] == {"reason": "user-stop"}


def test_approvals_end_the_run_with_an_interrupt_per_approval() -> None:
    run = _run(
        [
            {"type": "start", "messageId": "m1"},
            {"type": "tool-input-available", "toolCallId": "c1", "toolName": "rm", "input": {}},
            {"type": "tool-approval-request", "approvalId": "ap1", "toolCallId": "c1"},
            {"type": "tool-input-available", "toolCallId": "c2", "toolName": "rm", "input": {}},
            {"type": "tool-approval-request", "approvalId": "ap2", "toolCallId": "c2"},
        ]
    )
    end = _dump(run.finished("success"))[-1]
    assert end["outcome"]["type"] == "interrupt"
    assert [(i["id"], i["toolCallId"], i["reason"]) for i in end["outcome"]["interrupts"]] == [
        ("ap1", "c1", APPROVAL_REASON),
        ("ap2", "c2", APPROVAL_REASON),
    ]


def test_an_error_chunk_is_the_run_error_message() -> None:
    run = _run([{"type": "text-start", "id": "p"}, {"type": "error", "errorText": "boom 500"}])
    events = _dump(run.finished("error"))
    assert events == [
        {"type": "TEXT_MESSAGE_END", "messageId": "r1"},
        {"type": "RUN_ERROR", "message": "boom 500", "code": "answer_failed"},
    ]


def test_data_and_source_chunks_are_custom_events() -> None:
    chunk = {"type": "data-usage", "data": {"tokens": 3}}
    source = {"type": "source-url", "sourceId": "s", "url": "https://example.org"}
    events = _feed_all(AguiRun(thread_id="t", run_id="r"), [chunk, source])
    assert events == [
        {"type": "CUSTOM", "name": "data-usage", "value": chunk},
        {"type": "CUSTOM", "name": "source-url", "value": source},
    ]


def test_a_client_tool_call_is_pending_not_an_interrupt_and_its_result_is_not_echoed() -> None:
    first = AguiRun(thread_id="t", run_id="r1", client_tools=frozenset({"pick"}))
    _feed_all(
        first,
        [
            {"type": "start", "messageId": "m1"},
            {"type": "tool-input-available", "toolCallId": "c1", "toolName": "pick", "input": {}},
            {"type": "tool-approval-request", "approvalId": "ap1", "toolCallId": "c1"},
        ],
    )
    assert _dump(first.finished("success"))[-1]["outcome"] == {
        "type": "success",
        "pendingToolCallIds": ["c1"],
    }
    second = AguiRun(
        thread_id="t",
        run_id="r2",
        client_tools=frozenset({"pick"}),
        client_results=frozenset({"c1"}),
        continuation=True,
    )
    events = _feed_all(
        second,
        [
            {"type": "start", "messageId": "m1"},
            {"type": "tool-output-available", "toolCallId": "c1", "output": "blue"},
            {"type": "text-start", "id": "p"},
            {"type": "text-end", "id": "p"},
        ],
    )
    assert events == [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1:r2:1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1:r2:1"},
    ]
    assert _dump(second.finished("success"))[-1]["outcome"] == {"type": "success"}
