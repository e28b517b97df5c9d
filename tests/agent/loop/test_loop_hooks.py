"""Hook composition rules and the loop's hook contract (reference scenarios 26 and 27)."""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from loop_support import Recorder, Script, add_tool, collect, request, runner_for, tool, user
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from drupe.agent.hooks import (
    NOOP_HOOKS,
    ComposedHooks,
    ErrorDecision,
    Hooks,
    StepOverrides,
    StepPlan,
    StepResult,
    ToolExecutionEnd,
    TurnContext,
    compose_hooks,
)


def _ctx() -> TurnContext:
    return TurnContext(request=request([user("x")]))


def _plan(messages: tuple[ModelMessage, ...] = ()) -> StepPlan:
    return StepPlan(step_number=1, messages=messages, tools=(), system=None, model_settings=None)


# --- compose_hooks rules -----------------------------------------------------------------------


def test_compose_of_nothing_is_the_no_op_and_of_one_part_is_that_part() -> None:
    only = Hooks()
    assert compose_hooks([], []) is NOOP_HOOKS
    assert compose_hooks([only], []) is only
    assert compose_hooks([], [only]) is only
    assert isinstance(compose_hooks([only], [Hooks()]), ComposedHooks)


async def test_void_hooks_run_observers_first_then_features_in_registration_order() -> None:
    log: list[tuple[str, str, Any]] = []
    hooks = compose_hooks(
        [Recorder("obs1", log), Recorder("obs2", log)],
        [Recorder("feat1", log), Recorder("feat2", log)],
    )
    await hooks.on_start(_ctx())
    assert [label for label, _, _ in log] == ["obs1", "obs2", "feat1", "feat2"]


async def test_a_throwing_void_hook_is_isolated_and_the_next_one_still_runs() -> None:
    log: list[tuple[str, str, Any]] = []
    hooks = compose_hooks([Recorder("boom", log, raises=True)], [Recorder("after", log)])
    ctx = _ctx()
    for call in (
        hooks.on_start(ctx),
        hooks.on_abort(ctx),
    ):
        await call
    assert [(label, hook) for label, hook, _ in log] == [
        ("boom", "on_start"),
        ("after", "on_start"),
        ("boom", "on_abort"),
        ("after", "on_abort"),
    ]


class _Vote(Hooks):
    def __init__(self, vote: ErrorDecision | None, log: list[str], *, raises: bool = False):
        self.vote = vote
        self.log = log
        self.raises = raises

    async def on_error(self, ctx: TurnContext, error: BaseException) -> ErrorDecision | None:
        self.log.append(str(self.vote))
        if self.raises:
            raise RuntimeError("handler broke")
        return self.vote


async def test_on_error_runs_every_handler_and_any_retry_wins() -> None:
    log: list[str] = []
    hooks = compose_hooks(
        [_Vote("abort", log)],
        [_Vote("retry", log, raises=True), _Vote("retry", log), _Vote(None, log)],
    )
    assert await hooks.on_error(_ctx(), ValueError("x")) == "retry"
    assert log == ["abort", "retry", "retry", "None"]

    log.clear()
    none_retry = compose_hooks([_Vote(None, log)], [_Vote("retry", log, raises=True)])
    assert await none_retry.on_error(_ctx(), ValueError("x")) == "abort"
    assert len(log) == 2


class _Prepare(Hooks):
    def __init__(self, returns: StepOverrides | None, seen: list[int], *, raises: bool = False):
        self.returns = returns
        self.seen = seen
        self.raises = raises

    async def prepare_step(self, ctx: TurnContext, plan: StepPlan) -> StepOverrides | None:
        self.seen.append(len(plan.messages))
        if self.raises:
            raise RuntimeError("prepare broke")
        return self.returns


async def test_prepare_step_threads_messages_and_shallow_merges_last_writer_wins() -> None:
    one: tuple[ModelMessage, ...] = (ModelRequest(parts=[UserPromptPart(content="a")]),)
    two = (*one, ModelRequest(parts=[UserPromptPart(content="b")]))
    seen: list[int] = []
    hooks = compose_hooks(
        [_Prepare({"messages": one, "system": "first"}, seen)],
        [
            _Prepare(None, seen, raises=True),
            _Prepare({"system": "second", "model_settings": {"temperature": 0}}, seen),
            _Prepare({"messages": two}, seen),
            _Prepare(None, seen),
        ],
    )
    merged = await hooks.prepare_step(_ctx(), _plan())
    assert seen == [0, 1, 1, 1, 2]  # each hook sees the messages the previous one returned
    assert merged == {"messages": two, "system": "second", "model_settings": {"temperature": 0}}


async def test_prepare_step_overrides_apply_to_that_step_only() -> None:
    class SwapSystem(Hooks):
        async def prepare_step(self, ctx: TurnContext, plan: StepPlan) -> StepOverrides | None:
            if plan.step_number == 1:
                return {"system": "step one rules", "tools": ()}
            return None

    script = Script([["no tools for you"]])
    await collect(
        runner_for(script.model()),
        request([user("x")], system="base", tools=[add_tool()], hooks=[SwapSystem()]),
    )
    assert script.infos[0].instructions == "step one rules"
    assert script.infos[0].function_tools == []


# --- scenario 26: observers first, all on_step_finish run, one cumulative usage chunk -------------


class _StepUsage(Hooks):
    def __init__(self, log: list[tuple[str, str, Any]], usages: list[tuple[int, int]]):
        self.log = log
        self.usages = usages

    async def on_step_finish(self, ctx: TurnContext, step: StepResult) -> None:
        self.log.append(("usage-probe", "on_step_finish", step.step_number))
        self.usages.append((step.usage.input_tokens, step.usage.output_tokens))


async def test_scenario_26_observers_first_all_step_hooks_run_one_cumulative_usage_chunk() -> None:
    log: list[tuple[str, str, Any]] = []
    usages: list[tuple[int, int]] = []
    script = Script([[("call", "c1", "add", '{"a": 1, "b": 2}')], ["three"]])
    chunks = await collect(
        runner_for(script.model()),
        request(
            [user("x")],
            tools=[add_tool()],
            hooks=[Recorder("throws", log, raises=True), _StepUsage(log, usages)],
        ),
    )
    step_hooks = [(label, detail) for label, hook, detail in log if hook == "on_step_finish"]
    assert step_hooks == [("throws", 1), ("usage-probe", 1), ("throws", 2), ("usage-probe", 2)]

    metadata = [c for c in chunks if c["type"] == "message-metadata"]
    assert len(metadata) == 2  # one per step
    finish_steps = [i for i, c in enumerate(chunks) if c["type"] == "finish-step"]
    metadata_at = [i for i, c in enumerate(chunks) if c["type"] == "message-metadata"]
    assert metadata_at == [i + 1 for i in finish_steps]  # the observer wrote before the features

    running_in = running_out = 0
    for chunk, (step_in, step_out) in zip(metadata, usages, strict=True):
        running_in += step_in
        running_out += step_out
        assert chunk["messageMetadata"] == {
            "usage": {
                "inputTokens": running_in,
                "outputTokens": running_out,
                "totalTokens": running_in + running_out,
            },
            "modelId": "test:scripted",
        }
    assert running_in > 0 and running_out > 0


# --- scenario 27: a throwing tool ---------------------------------------------------------------


class _FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_scenario_27_throwing_tool_end_hook_sees_tool_error_timed_around_execute() -> None:
    clock = _FakeClock()
    ends: list[ToolExecutionEnd] = []
    order: list[str] = []

    class SlowHooks(Hooks):
        async def on_tool_execution_start(self, ctx: TurnContext, event: Any) -> None:
            clock.now += 10.0  # hook latency must not count
            order.append("start")

        async def on_tool_execution_end(self, ctx: TurnContext, event: ToolExecutionEnd) -> None:
            clock.now += 20.0
            order.append("end")
            ends.append(event)

    def failing(args: Any, ctx: Any) -> Any:
        clock.now += 0.25
        order.append("execute")
        raise PermissionError("no access to /etc")

    script = Script([[("call", "c1", "read", '{"path": "/etc"}')], ["could not read"]])
    chunks = await collect(
        runner_for(script.model(), clock=clock),
        request([user("x")], tools=[tool("read", failing)], hooks=[SlowHooks()]),
    )

    assert order == ["start", "execute", "end"]
    (end,) = ends
    assert end.tool_output["type"] == "tool-error"
    assert isinstance(end.tool_output["error"], PermissionError)
    assert end.duration_ms == 250.0
    assert (end.call_id, end.tool_name, dict(end.input)) == ("c1", "read", {"path": "/etc"})
    # the error is passed on after the end hook saw it: reported to the stream and the model
    failure = next(c for c in chunks if c["type"] == "tool-output-error")
    assert failure["errorText"] == "no access to /etc"
    assert chunks[-1]["type"] == "finish"


async def test_tool_hooks_see_a_result_with_its_duration() -> None:
    clock = _FakeClock()
    ends: list[ToolExecutionEnd] = []

    class Ends(Hooks):
        async def on_tool_execution_end(self, ctx: TurnContext, event: ToolExecutionEnd) -> None:
            ends.append(event)

    def timed(args: Any, ctx: Any) -> Any:
        clock.now += 0.004
        return "ok"

    script = Script([[("call", "c1", "t", "{}")], ["done"]])
    await collect(
        runner_for(script.model(), clock=clock),
        request([user("x")], tools=[tool("t", timed)], hooks=[Ends()]),
    )
    assert ends[0].tool_output == {"type": "tool-result", "output": "ok"}
    assert round(ends[0].duration_ms, 6) == 4.0


async def test_hook_chunks_are_emitted_after_the_hook_and_on_finish_runs_once() -> None:
    log: list[tuple[str, str, Any]] = []

    class Writer(Hooks):
        async def on_start(self, ctx: TurnContext) -> None:
            ctx.write({"type": "data-note", "data": {"at": "start"}})

        async def on_finish(self, ctx: TurnContext, result: Any) -> None:
            ctx.write({"type": "data-note", "data": {"at": "finish"}})

    script = Script([["hi"]])
    chunks = await collect(
        runner_for(script.model()), request([user("x")], hooks=[Writer(), Recorder("r", log)])
    )
    assert chunks[1] == {"type": "data-note", "data": {"at": "start"}}
    assert chunks[-2] == {"type": "data-note", "data": {"at": "finish"}}
    outcomes = [hook for _, hook, _ in log if hook in ("on_finish", "on_error", "on_abort")]
    assert outcomes == ["on_finish"]


# --- property: the folding rules hold for any mix of parts ---------------------------------------


class _Scripted(Hooks):
    """A hook whose prepare_step and on_error outcomes are data."""

    def __init__(self, name: str, log: list[str], returns: Any, vote: Any, raises: bool):
        self.name, self.log, self.returns, self.vote, self.raises = name, log, returns, vote, raises

    async def on_step_finish(self, ctx: TurnContext, step: Any) -> None:
        self.log.append(self.name)
        if self.raises:
            raise RuntimeError(self.name)

    async def prepare_step(self, ctx: TurnContext, plan: StepPlan) -> StepOverrides | None:
        if self.raises:
            raise RuntimeError(self.name)
        return self.returns

    async def on_error(self, ctx: TurnContext, error: BaseException) -> ErrorDecision | None:
        if self.raises:
            raise RuntimeError(self.name)
        return self.vote


_part = st.tuples(
    st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(["system", "model_settings"]), st.integers(0, 9)),
    ),
    st.sampled_from([None, "retry", "abort"]),
    st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(observers=st.lists(_part, max_size=3), features=st.lists(_part, max_size=3))
def test_folding_rules_hold_for_any_parts(observers: list[Any], features: list[Any]) -> None:
    log: list[str] = []

    def build(prefix: str, specs: list[Any]) -> list[Hooks]:
        return [_Scripted(f"{prefix}{i}", log, r, v, x) for i, (r, v, x) in enumerate(specs)]

    specs = observers + features
    assume(len(specs) > 1)  # fewer parts are returned as-is (tested above)
    hooks = compose_hooks(build("o", observers), build("f", features))

    async def run() -> tuple[Any, Any]:
        ctx = _ctx()
        await hooks.on_step_finish(ctx, None)  # type: ignore[arg-type]
        return await hooks.prepare_step(ctx, _plan()), await hooks.on_error(ctx, ValueError())

    merged, decision = anyio.run(run)
    assert log == [f"o{i}" for i in range(len(observers))] + [f"f{i}" for i in range(len(features))]
    expected: dict[str, Any] = {}
    for returns, _, raises in specs:
        if not raises and returns:
            expected.update(returns)
    assert (merged or {}) == expected
    votes = [vote for _, vote, raises in specs if not raises]
    assert decision == ("retry" if "retry" in votes else "abort")
