"""steer_yield: a pending steer stops the turn cleanly at the next step boundary (scenario 16)."""

from __future__ import annotations

from loop_support import Script, add_tool, collect, request, runner_for, tool, types, user
from pydantic_ai.messages import ModelRequest, UserPromptPart

from drupe.agent.features.steer_yield import SteerYield, decide_boundary


async def test_pending_steer_stops_after_the_step_with_a_clean_finish() -> None:
    pending = {"steer": False}

    def add(args: object, ctx: object) -> object:
        pending["steer"] = True  # a steer arrives while the tool runs
        return 2

    script = Script([[("call", "c1", "add", "{}")], ["never asked"]])
    chunks = await collect(
        runner_for(script.model()),
        request([user("x")], tools=[tool("add", add)], steer_pending=lambda: pending["steer"]),
    )
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    assert types(chunks).count("start-step") == 1
    assert len(script.replies) == 1  # no second model request


async def test_scenario_16_steer_and_tool_call_cap_on_the_same_step_raise_no_cap_error() -> None:
    script = Script([[("call", "c1", "add", '{"a": 1, "b": 1}')]])
    chunks = await collect(
        runner_for(script.model()),
        request([user("x")], tools=[add_tool()], max_tool_calls=1, steer_pending=lambda: True),
    )
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    assert "tool-output-available" in types(chunks)


async def test_steer_is_not_evaluated_while_an_approval_is_pending() -> None:
    asked: list[bool] = []

    def probe() -> bool:
        asked.append(True)
        return True

    gated = tool("rm", lambda a, c: "gone", needs_approval=lambda args: True)
    script = Script([[("call", "c1", "rm", "{}")]])
    chunks = await collect(
        runner_for(script.model()), request([user("x")], tools=[gated], steer_pending=probe)
    )
    assert asked == []
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}


async def test_a_steer_continuation_wraps_the_model_facing_copy_only() -> None:
    steer_row = user("also check the tests", message_id="u2")
    history = [user("fix the bug"), steer_row]
    script = Script([["on it"]])
    await collect(runner_for(script.model()), request(history, wrap_last_user_as_steer=True))
    last = script.seen[0][-1]
    assert isinstance(last, ModelRequest)
    prompt = last.parts[0]
    assert isinstance(prompt, UserPromptPart)
    assert isinstance(prompt.content, str)
    assert prompt.content.startswith("<system-reminder>")
    assert "also check the tests" in prompt.content
    first = script.seen[0][0]
    assert isinstance(first, ModelRequest)
    assert first.parts[0].content == "fix the bug"  # type: ignore[union-attr]
    assert steer_row["parts"] == [{"type": "text", "text": "also check the tests"}]


def test_boundary_decision_table() -> None:
    def decide(steer: bool, calls: int, steps: int) -> str:
        return decide_boundary(
            steer=steer, tool_calls=calls, max_tool_calls=3, steps=steps, max_steps=5
        )

    assert decide(False, 1, 1) == "continue"
    assert decide(True, 1, 1) == "yield"
    assert decide(False, 3, 1) == "tool_call_limit_reached"
    assert decide(True, 3, 1) == "yield"
    assert decide(False, 1, 5) == "step_limit_reached"
    assert decide(True, 9, 9) == "yield"


def test_a_throwing_steer_probe_counts_as_no_steer() -> None:
    def broken() -> bool:
        raise OSError("queue unavailable")

    assert SteerYield(broken).fired() is False
    assert SteerYield(None).fired() is False
    assert SteerYield(lambda: True).fired() is True
