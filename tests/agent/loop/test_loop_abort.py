"""Abort (scenario 28): later chunks dropped, on_abort runs, on_error does not, settles once."""

from __future__ import annotations

import dataclasses
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
from loop_support import Recorder, Script, collect, request, runner_for, tool, user
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from drupe.agent.hooks import Hooks, TurnContext
from drupe.agent.loop import AgentRunner
from drupe.chunks.types import Chunk
from drupe.errors import ConfigError


def _stalling_model(release: anyio.Event) -> FunctionModel:
    """Streams two deltas, then waits for ``release`` before streaming the rest."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        yield "first "
        yield "second "
        await release.wait()
        yield "never seen"

    def unary(messages: list[ModelMessage], info: AgentInfo) -> Any:
        raise AssertionError("streams only")

    return FunctionModel(unary, stream_function=stream)


def _outcomes(log: list[tuple[str, str, Any]]) -> list[str]:
    return [hook for _, hook, _ in log if hook in ("on_finish", "on_error", "on_abort")]


async def test_scenario_28_abort_mid_stream_drops_later_chunks_and_settles_once() -> None:
    log: list[tuple[str, str, Any]] = []
    release = anyio.Event()
    runner = AgentRunner(lambda _: _stalling_model(release))
    received: list[Chunk] = []

    with anyio.CancelScope() as scope:  # the manager's abort cancels the consuming task's scope
        async with aclosing(runner.stream(request([user("x")], hooks=[Recorder("r", log)]))) as it:
            async for chunk in it:
                received.append(chunk)
                if chunk.get("delta") == "second ":
                    release.set()  # the model would now go on ...
                    scope.cancel()  # ... but the turn is aborted first

    assert scope.cancelled_caught  # the output closed without an error
    assert [c["type"] for c in received] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
    ]
    assert not any(c.get("delta") == "never seen" for c in received)
    assert _outcomes(log) == ["on_abort"]


async def test_consumer_closing_the_stream_counts_as_abort() -> None:
    log: list[tuple[str, str, Any]] = []
    runner = runner_for(Script([["a", "b", "c"]]).model())
    stream = runner.stream(request([user("x")], hooks=[Recorder("r", log)]))
    async for chunk in stream:
        if chunk["type"] == "text-start":
            break
    await stream.aclose()
    assert _outcomes(log) == ["on_abort"]


async def test_closing_after_finish_does_not_abort() -> None:
    log: list[tuple[str, str, Any]] = []
    runner = runner_for(Script([["done"]]).model())
    stream = runner.stream(request([user("x")], hooks=[Recorder("r", log)]))
    async for chunk in stream:
        if chunk["type"] == "finish":
            break
    await stream.aclose()
    assert _outcomes(log) == ["on_finish"]


async def test_abort_during_a_tool_skips_the_end_hook_and_runs_on_abort() -> None:
    log: list[tuple[str, str, Any]] = []
    entered = anyio.Event()

    async def hang(args: Any, ctx: Any) -> Any:
        entered.set()
        await anyio.sleep_forever()

    entry = dataclasses.replace(tool("hang", lambda a, c: None), execute=hang)
    runner = runner_for(Script([[("call", "c1", "hang", "{}")]]).model())
    received: list[Chunk] = []
    async with anyio.create_task_group() as tg:

        async def consume() -> None:
            async with aclosing(
                runner.stream(request([user("x")], tools=[entry], hooks=[Recorder("r", log)]))
            ) as it:
                async for chunk in it:
                    received.append(chunk)

        tg.start_soon(consume)
        await entered.wait()
        tg.cancel_scope.cancel()

    hooks_seen = [hook for _, hook, _ in log]
    assert "on_tool_execution_start" in hooks_seen
    assert "on_tool_execution_end" not in hooks_seen
    assert _outcomes(log) == ["on_abort"]
    assert received[-1]["type"] == "tool-input-available"


async def test_on_abort_is_shielded_and_bounded_and_its_chunks_are_dropped() -> None:
    finished_abort: list[bool] = []

    class SlowAbort(Hooks):
        async def on_abort(self, ctx: TurnContext) -> None:
            ctx.write({"type": "data-late", "data": {}})
            await anyio.lowlevel.checkpoint()  # runs although the task is cancelled (shielded)
            finished_abort.append(True)
            await anyio.sleep_forever()  # bounded by settle_limit

    release = anyio.Event()
    runner = AgentRunner(lambda _: _stalling_model(release), settle_limit=0.01)
    received: list[Chunk] = []
    with anyio.CancelScope() as scope:
        async with aclosing(runner.stream(request([user("x")], hooks=[SlowAbort()]))) as it:
            async for chunk in it:
                received.append(chunk)
                if chunk["type"] == "text-start":
                    scope.cancel()
    assert finished_abort == [True]
    assert all(c["type"] != "data-late" for c in received)


async def test_errors_run_on_error_once_and_propagate() -> None:
    log: list[tuple[str, str, Any]] = []
    script = Script([["partial", RuntimeError("model exploded")]])
    runner = runner_for(script.model())
    try:
        await collect(runner, request([user("x")], hooks=[Recorder("r", log)]))
    except RuntimeError as error:
        assert str(error) == "model exploded"
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("the error must propagate")
    assert _outcomes(log) == ["on_error"]


async def test_a_hanging_on_error_is_bounded_and_the_error_still_propagates() -> None:
    class Hangs(Hooks):
        async def on_error(self, ctx: TurnContext, error: BaseException) -> Any:
            await anyio.sleep_forever()

    runner = AgentRunner(
        lambda _: Script([[RuntimeError("model exploded")]]).model(), settle_limit=0.01
    )
    try:
        await collect(runner, request([user("x")], hooks=[Hangs()]))
    except RuntimeError as error:
        assert str(error) == "model exploded"
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("the error must propagate")


async def test_no_chunk_is_emitted_after_the_cancel_even_without_a_model_checkpoint() -> None:
    runner = runner_for(Script([["one two three"]]).model())
    received: list[Chunk] = []
    with anyio.CancelScope() as scope:
        async with aclosing(runner.stream(request([user("x")]))) as it:
            async for chunk in it:
                received.append(chunk)
                if chunk["type"] == "text-start":
                    scope.cancel()  # the text-delta computed with it must not come out
    assert scope.cancelled_caught
    assert [c["type"] for c in received][-1] == "text-start"


async def test_an_unknown_model_fails_before_any_chunk() -> None:
    log: list[tuple[str, str, Any]] = []

    def resolve(model_id: str) -> Any:
        raise ConfigError(f"unknown provider in {model_id!r}")

    received: list[Chunk] = []
    try:
        async for chunk in AgentRunner(resolve).stream(
            request([user("x")], hooks=[Recorder("r", log)])
        ):
            received.append(chunk)
    except ConfigError as error:
        assert "test:scripted" in str(error)
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("the error must propagate")
    assert received == []
    assert _outcomes(log) == ["on_error"]
