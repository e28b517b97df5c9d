"""Pure translation: recorded Claude Agent SDK message sequences -> runtime events.

The sequences follow what the bundled CLI 2.1.332 sent in the end-to-end runs (one ``init`` per
turn, ``status: requesting`` before each model call, stream events with the assistant message
interleaved, a ``UserMessage`` carrying the tool result, then the ``ResultMessage``).
"""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from drupe.chunks.accumulate import accumulate
from drupe.chunks.codec import validate_chunk
from drupe.sessions.drivers.base import (
    ApiRetry,
    ChunkEvent,
    CompactionComplete,
    CompactionError,
    CompactionStart,
    ErrorEvent,
    ResumeToken,
    RuntimeEvent,
    RuntimeTurnStart,
    SteerBoundary,
    SteerUndelivered,
    SupportedCommands,
    TurnComplete,
    UsageEvent,
)
from drupe.sessions.drivers.claude_code.content import tool_output
from drupe.sessions.drivers.claude_code.events import Translator
from drupe.sessions.drivers.claude_code.steer import SteerHolder
from drupe.sessions.drivers.claude_code.usage import ui_usage, usage_metadata
from tests.sessions.claude_code.cli_support import said

SID = "7d9c7393-2f14-406b-b202-b70afaf2aabe"
START_USAGE = {"input_tokens": 10, "output_tokens": 1}
END_USAGE = {"output_tokens": 5}
START = {"type": "message_start", "message": {"id": "msg_9", "usage": START_USAGE}}


def init(session_id: str = SID, commands: list[str] | None = None) -> SystemMessage:
    data: dict[str, Any] = {"type": "system", "subtype": "init", "session_id": session_id}
    if commands is not None:
        data["slash_commands"] = commands
    return SystemMessage("init", data)


def status(**fields: Any) -> SystemMessage:
    return SystemMessage("status", {"type": "system", "subtype": "status", **fields})


def ev(event: dict[str, Any], parent: str | None = None, **stamps: Any) -> StreamEvent:
    return StreamEvent(uuid="u", session_id=SID, event=event, parent_tool_use_id=parent, **stamps)


def text_message(text: str, parent: str | None = None) -> list[object]:
    return [
        ev({"type": "message_start", "message": {"id": "msg_2", "usage": START_USAGE}}, parent),
        ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}, parent),
        ev(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
            parent,
        ),
        AssistantMessage([TextBlock(text)], "m", parent_tool_use_id=parent),
        ev({"type": "content_block_stop", "index": 0}, parent),
        ev(
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": END_USAGE},
            parent,
        ),
        ev({"type": "message_stop"}, parent),
    ]


def tool_message(call_id: str, command: str) -> list[object]:
    args = '{"command": "' + command + '"}'
    block = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {}}
    return [
        ev({"type": "message_start", "message": {"id": "msg_1", "usage": START_USAGE}}),
        ev({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}}),
        ev(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "hmm"},
            }
        ),
        ev({"type": "content_block_stop", "index": 0}),
        ev({"type": "content_block_start", "index": 1, "content_block": block}),
        ev(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": args[:9]},
            }
        ),
        ev(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": args[9:]},
            }
        ),
        AssistantMessage([ToolUseBlock(call_id, "Bash", {"command": command})], "m"),
        ev({"type": "content_block_stop", "index": 1}),
        ev({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": END_USAGE}),
        ev({"type": "message_stop"}),
    ]


def tool_result(call_id: str, content: Any, *, is_error: bool = False) -> UserMessage:
    return UserMessage([ToolResultBlock(call_id, content, is_error)])


def result(*, is_error: bool = False, subtype: str = "success", **extra: Any) -> ResultMessage:
    usage = {"input_tokens": 20, "cache_read_input_tokens": 5, "output_tokens": 10}
    return ResultMessage(
        subtype=subtype,
        duration_ms=600,
        duration_api_ms=300,
        is_error=is_error,
        num_turns=1,
        session_id=SID,
        usage=usage,
        total_cost_usd=0.0002,
        **extra,
    )


def run(translator: Translator, messages: list[object]) -> list[RuntimeEvent]:
    out: list[RuntimeEvent] = []
    for message in messages:
        out += translator.feed(message)
    return out


def chunks(events: list[RuntimeEvent]) -> list[dict[str, Any]]:
    return [validate_chunk(e.chunk) for e in events if isinstance(e, ChunkEvent)]


def fresh(model_id: str = "claude-sonnet-4-5") -> Translator:
    translator = Translator(SteerHolder(), model_id=model_id)
    translator.begin_turn()
    translator.steers.begin_turn()
    return translator


def test_a_tool_turn_becomes_steps_of_ui_chunks() -> None:
    translator = fresh()
    events = run(
        translator,
        [
            init(),
            status(status="requesting"),
            *tool_message("toolu_1", "echo hi"),
            tool_result("toolu_1", "hi\n"),
            status(status="requesting"),
            *text_message("done"),
            result(),
        ],
    )
    assert events[0] == ResumeToken(SID)
    assert isinstance(events[-1], TurnComplete)
    kinds = [c["type"] for c in chunks(events)]
    assert kinds == [
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-delta",
        "tool-input-available",
        "finish-step",
        "tool-output-available",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "message-metadata",
    ]
    message = accumulate([{"type": "start", "messageId": "m"}, *chunks(events), {"type": "finish"}])
    types = [p["type"] for p in message["parts"]]
    assert types == ["step-start", "reasoning", "tool-Bash", "step-start", "text"]
    tool = message["parts"][2]
    assert tool["state"] == "output-available"
    assert tool["input"] == {"command": "echo hi"}
    assert tool["output"] == "hi\n"
    assert message["metadata"]["usage"] == {
        "inputTokens": 25,
        "outputTokens": 10,
        "totalTokens": 35,
        "cachedInputTokens": 5,
    }


def test_init_emits_the_resume_token_only_when_it_changes() -> None:
    translator = Translator(SteerHolder(), resume_token="old")
    assert translator.feed(init("old")) == []
    assert translator.feed(init("new")) == [ResumeToken("new")]
    assert translator.feed(init("new")) == []
    assert translator.feed(init("", commands=None)) == []


def test_slash_commands_are_published_when_they_change() -> None:
    translator = Translator(SteerHolder(), resume_token=SID)
    assert translator.feed(init(commands=["compact", "clear"])) == [
        SupportedCommands(("compact", "clear"))
    ]
    assert translator.feed(init(commands=["compact", "clear"])) == []
    changed = SystemMessage(
        "commands_changed",
        {"subtype": "commands_changed", "commands": [{"name": "compact"}, {"name": "poem"}]},
    )
    assert translator.feed(changed) == [SupportedCommands(("compact", "poem"))]


def test_subagent_messages_make_no_chunks() -> None:
    translator = fresh()
    events = run(
        translator,
        [*text_message("inside", parent="toolu_9"), tool_result("x", "y")],
    )
    assert events[-1:] == [
        ChunkEvent({"type": "tool-output-available", "toolCallId": "x", "output": "y"})
    ]
    sub = UserMessage([ToolResultBlock("x", "y")], parent_tool_use_id="toolu_9")
    assert translator.feed(sub) == []
    assert run(translator, text_message("inside", parent="toolu_9")) == []


def test_a_turn_the_cli_starts_by_itself_becomes_a_runtime_turn() -> None:
    """Issue 8 point 2: e.g. the CLI's follow-up turn after a background subagent."""
    translator = Translator(SteerHolder())
    assert run(translator, [tool_result("toolu_x", "late")]) == []  # no turn: dropped
    events = run(translator, [init(), *text_message("the subagent found 3 bugs"), result()])
    assert events[:2] == [ResumeToken(SID), RuntimeTurnStart()]
    message = accumulate([{"type": "start", "messageId": "r"}, *chunks(events), {"type": "finish"}])
    assert [p["text"] for p in message["parts"] if p["type"] == "text"] == [
        "the subagent found 3 bugs"
    ]
    assert events[-1] == TurnComplete()
    assert not translator.turn_active


def test_an_error_result_is_an_error_event_even_with_subtype_success() -> None:
    translator = fresh()
    events = run(
        translator,
        [
            AssistantMessage([TextBlock("API Error")], "m", error="rate_limit"),
            result(is_error=True, result="API Error: 429", api_error_status=429),
        ],
    )
    assert events[-1] == ErrorEvent(
        {"name": "ClaudeCodeError", "message": "API Error: 429", "statusCode": 429}
    )
    assert not any(isinstance(e, TurnComplete) for e in events)
    assert not translator.turn_active


def test_tool_errors_and_denials() -> None:
    translator = fresh()
    translator.denied.add("toolu_2")
    events = run(
        translator,
        [
            tool_result("toolu_1", [{"type": "text", "text": "boom"}], is_error=True),
            tool_result("toolu_2", "human said no", is_error=True),
        ],
    )
    assert chunks(events) == [
        {"type": "tool-output-error", "toolCallId": "toolu_1", "errorText": "boom"}
    ]


def test_the_steer_boundary_comes_before_the_next_top_level_message() -> None:
    translator = fresh()
    steer = said("bananas")
    assert translator.steers.offer(steer)
    head = run(translator, tool_message("toolu_1", "echo hi")[:8])
    hook = translator.steers.inject()  # the PreToolUse hook ran here
    assert hook is not None and "bananas" in hook
    rest = run(
        translator,
        [
            *tool_message("toolu_1", "echo hi")[8:],
            tool_result("toolu_1", "hi"),
            *text_message("sub", parent="toolu_1")[:1],  # a subagent's message_start: ignored
            *text_message("bananas!"),
            result(),
        ],
    )
    events = head + rest
    at = next(i for i, e in enumerate(events) if isinstance(e, SteerBoundary))
    assert events[at] == SteerBoundary((steer,))
    # the usage of the first message binds to A1a: written just before the boundary
    a1a_usage = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    assert events[at - 1] == ChunkEvent(
        {
            "type": "message-metadata",
            "messageMetadata": {"usage": a1a_usage, "modelId": "claude-sonnet-4-5"},
        }
    )
    assert events[at - 2] == ChunkEvent(
        {"type": "tool-output-available", "toolCallId": "toolu_1", "output": "hi"}
    )
    assert events[at + 1] == ChunkEvent({"type": "start-step"})
    # the result's metadata is the rest of the turn (A2's share)
    a2 = [c for c in chunks(events[at:]) if c["type"] == "message-metadata"]
    assert a2[-1]["messageMetadata"]["usage"] == {
        "inputTokens": 15,
        "outputTokens": 5,
        "totalTokens": 20,
        "cachedInputTokens": 5,
    }
    usage_events = [e for e in events if isinstance(e, UsageEvent)]
    assert [e.invocation["requestId"] for e in usage_events] == ["msg_1", "msg_2"]
    assert usage_events[0].invocation["usage"] == a1a_usage
    assert sum(isinstance(e, SteerBoundary) for e in events) == 1
    assert not any(isinstance(e, SteerUndelivered) for e in events)


def test_an_armed_boundary_is_dropped_at_the_end_of_the_turn() -> None:
    translator = fresh()
    translator.steers.offer(said("late"))
    translator.steers.inject()
    events = run(translator, [result()])
    assert not any(isinstance(e, SteerBoundary | SteerUndelivered) for e in events)
    assert translator.steers.take_boundary() == ()


def test_steers_never_injected_come_back_before_the_terminal() -> None:
    translator = fresh()
    steer = said("one more thing")
    translator.steers.offer(steer)
    events = run(translator, [*text_message("short"), result()])
    assert events[-2:] == [SteerUndelivered((steer,)), TurnComplete()]


def test_manual_compaction_with_a_boundary_completes_once_with_an_anchor() -> None:
    translator = fresh()
    boundary = SystemMessage(
        "compact_boundary",
        {
            "subtype": "compact_boundary",
            "compact_metadata": {"trigger": "manual", "pre_tokens": 9000, "post_tokens": 700},
        },
    )
    events = run(
        translator,
        [
            status(status="compacting"),
            status(status=None, compact_result="success"),
            init(),
            boundary,
            result(),
        ],
    )
    assert events[0] == CompactionStart()
    completes = [e for e in events if isinstance(e, CompactionComplete)]
    assert len(completes) == 1
    anchor = completes[0].anchor
    assert anchor is not None
    assert (anchor.trigger, anchor.pre_tokens, anchor.post_tokens) == ("manual", 9000, 700)


def test_compaction_success_without_a_boundary_settles_anchorless() -> None:
    translator = fresh()
    events = run(
        translator,
        [
            status(status="compacting"),
            status(compact_result="success"),
            status(status="requesting"),
        ],
    )
    assert events == [CompactionStart(), CompactionComplete()]
    assert run(translator, [result()])[-1] == TurnComplete()


def test_compaction_failure_and_api_retry() -> None:
    translator = fresh()
    retry = SystemMessage(
        "api_retry",
        {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 3, "uuid": "x"},
    )
    events = run(
        translator,
        [
            status(status="compacting"),
            status(compact_result="failed", compact_error="too big"),
            retry,
        ],
    )
    assert events == [
        CompactionStart(),
        CompactionError("too big"),
        ChunkEvent(
            {
                "type": "data-retry",
                "data": {
                    "attempt": 2,
                    "maxAttempts": 4,
                    "delayMs": None,
                    "statusCode": None,
                    "message": None,
                },
                "transient": True,
            }
        ),
        ApiRetry({"attempt": 1, "max_retries": 3}),
    ]


def test_abandon_turn_closes_parts_and_returns_steers() -> None:
    translator = fresh()
    steer = said("wait")
    translator.steers.offer(steer)
    events = run(translator, tool_message("toolu_1", "echo hi")[:6])
    events += translator.abandon_turn({"name": "DriverError", "message": "the CLI exited"})
    kinds = [c["type"] for c in chunks(events)]
    assert kinds[-2:] == ["tool-input-available", "finish-step"]
    assert events[-2:] == [
        SteerUndelivered((steer,)),
        ErrorEvent({"name": "DriverError", "message": "the CLI exited"}),
    ]
    assert translator.abandon_turn({"name": "x", "message": "y"}) == []


def test_tool_output_and_usage_shapes() -> None:
    assert tool_output(None) == ""
    assert tool_output([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "ab"
    image = [{"type": "image", "source": {}}]
    assert tool_output(image) == image
    metadata = usage_metadata(ui_usage(result().usage), "claude-sonnet-4-5", 0.0002)
    assert metadata["modelId"] == "claude-sonnet-4-5"
    assert metadata["providerCostUsd"] == 0.0002


def test_a_turn_the_cli_started_on_its_own_never_ends_ours() -> None:
    translator = Translator(SteerHolder(), resume_token=SID)
    translator.begin_turn("u-mine")
    translator.steers.begin_turn()
    # A background subagent's turn is still finishing: its messages answer another uuid.
    foreign = [ev(START, user_message_uuid="u-task"), *text_message("background report")[1:]]
    assert run(translator, [*foreign, result(user_message_uuids=["u-task"])]) == []
    assert translator.turn_active
    ours = [ev(START, user_message_uuids=["u-mine"]), *text_message("my answer")[1:]]
    events = run(translator, [*ours, result(user_message_uuids=["u-mine"])])
    assert [c["type"] for c in chunks(events)][:3] == ["start-step", "text-start", "text-delta"]
    assert isinstance(events[-1], TurnComplete)
