"""The cost gate (scenario 24), approval gating (scenario 25) and the meta-tools."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from drupe.errors import ToolError
from drupe.tools.base import DeferMode, ToolContext, ToolEntry
from drupe.tools.deferral import (
    defer_threshold,
    plan_exposition,
    should_defer_auto_pool,
    tool_cost,
    tools_cost,
)
from drupe.tools.meta import TOOL_INSPECT, TOOL_INVOKE, TOOL_SEARCH

CONTEXT = ToolContext(conversation_id="c1", tool_call_id="call-1")


def _tool(
    name: str,
    *,
    description: str = "does a thing",
    padding: int = 0,
    defer: DeferMode = "auto",
    gated: bool | None = None,
    namespace: str = "builtin",
) -> ToolEntry:
    seen: list[tuple[Mapping[str, Any], ToolContext]] = []

    async def execute(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        seen.append((arguments, context))
        return {"tool": name, "arguments": dict(arguments), "call": context.tool_call_id}

    return ToolEntry(
        name=name,
        description=description + " " + "x" * padding,
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=execute,
        defer=defer,
        namespace=namespace,
        needs_approval=None if gated is None else (lambda _args: gated),
    )


def _heavy_pool(count: int, tokens_each: int) -> list[ToolEntry]:
    return [_tool(f"heavy_{i}", padding=tokens_each * 4) for i in range(count)]


def test_cost_is_chars_over_four_rounded_up() -> None:
    entry = _tool("abc", description="d")  # name 3 + description "d " 2 + schema
    schema_chars = len('{"type":"object","properties":{"q":{"type":"string"}}}')
    assert tool_cost(entry) == -(-(3 + 2 + schema_chars) // 4)
    assert tools_cost([entry, entry]) == -(-2 * (3 + 2 + schema_chars) // 4)


def test_threshold_is_ten_percent_with_a_32k_fallback() -> None:
    assert defer_threshold(None) == 3_200
    assert defer_threshold(0) == 3_200
    assert defer_threshold(200_000) == 20_000
    assert defer_threshold(12_345) == 1_234
    assert should_defer_auto_pool(5, 3_201, None)
    assert not should_defer_auto_pool(5, 3_200, None)
    assert not should_defer_auto_pool(4, 100_000, None)
    # A tiny window: above 10% is not enough, the pool must also cost more than 500 tokens.
    assert not should_defer_auto_pool(5, 500, 1_000)
    assert should_defer_auto_pool(5, 501, 1_000)


def test_scenario_24_five_costly_auto_tools_are_all_deferred_with_meta_tools() -> None:
    pool = _heavy_pool(5, 700)  # ~3,500+ tokens > 3,200 (10% of the 32k fallback) and > 500
    pinned = _tool("pinned", defer="never")
    exposition = plan_exposition([pinned, *pool], context_window=None)
    assert [e.name for e in exposition.deferred] == [e.name for e in pool]
    assert [e.name for e in exposition.inline] == ["pinned"]
    assert [e.name for e in exposition.meta] == [TOOL_SEARCH, TOOL_INSPECT, TOOL_INVOKE]
    assert [e.name for e in exposition.advertised] == [
        "pinned",
        TOOL_SEARCH,
        TOOL_INSPECT,
        TOOL_INVOKE,
    ]
    assert exposition.auto_cost > exposition.threshold == 3_200
    section = exposition.prompt_section
    assert section is not None
    assert section.startswith("<deferred-tools>") and section.endswith("</deferred-tools>")
    for entry in pool:
        assert entry.name in section
    assert "pinned" not in section


def test_scenario_24_four_costly_tools_or_one_huge_tool_are_not_deferred() -> None:
    four = _heavy_pool(4, 2_000)
    exposition = plan_exposition(four, context_window=None)
    assert exposition.deferred == [] and exposition.meta == []
    assert exposition.prompt_section is None
    assert exposition.inline == four
    huge = [_tool("huge", padding=4 * 50_000)]
    assert plan_exposition(huge, context_window=None).deferred == []


def test_cheap_pool_and_large_window_stay_inline() -> None:
    pool = _heavy_pool(5, 700)
    assert plan_exposition(pool, context_window=1_000_000).deferred == []
    cheap = [_tool(f"t{i}") for i in range(10)]
    assert plan_exposition(cheap, context_window=1_000).deferred == []  # > 10% but < 500 tokens


def test_always_is_deferred_and_never_stays_inline() -> None:
    entries = [_tool("a", defer="always"), _tool("n", defer="never"), _tool("auto")]
    exposition = plan_exposition(entries, context_window=None)
    assert [e.name for e in exposition.deferred] == ["a"]
    assert [e.name for e in exposition.inline] == ["n", "auto"]
    assert len(exposition.meta) == 3


def test_scenario_25_approval_gated_tools_are_never_deferred() -> None:
    gated_always = _tool("gated_always", defer="always", gated=True)
    gated_auto = _tool("mcp__fs__rm", padding=4 * 700, gated=False, namespace="mcp:fs")
    pool = _heavy_pool(5, 700)
    exposition = plan_exposition([gated_always, gated_auto, *pool], context_window=None)
    assert [e.name for e in exposition.inline] == ["gated_always", "mcp__fs__rm"]
    assert [e.name for e in exposition.deferred] == [e.name for e in pool]


def test_gated_tools_do_not_count_towards_the_auto_pool() -> None:
    gated = [_tool(f"g{i}", padding=4 * 2_000, gated=True) for i in range(5)]
    light = [_tool("light")]
    assert plan_exposition([*gated, *light], context_window=None).deferred == []


def test_a_caller_supplied_tool_search_disables_deferral() -> None:
    own_search = _tool(TOOL_SEARCH, defer="never")
    pool = _heavy_pool(6, 700)
    exposition = plan_exposition(
        [own_search, *pool, _tool("x", defer="always")], context_window=None
    )
    assert exposition.deferred == [] and exposition.meta == []
    assert exposition.prompt_section is None
    assert len(exposition.inline) == 8


def _meta(exposition_entries: list[ToolEntry]) -> dict[str, ToolEntry]:
    exposition = plan_exposition(exposition_entries, context_window=None)
    return {entry.name: entry for entry in exposition.meta}


async def test_tool_search_inspect_and_invoke() -> None:
    pool = _heavy_pool(5, 700)
    weather = _tool("get_weather", description="current weather for a city", defer="always")
    meta = _meta([*pool, weather])
    found = await meta[TOOL_SEARCH].execute({"query": "weather city"}, CONTEXT)
    assert found["tools"][0]["name"] == "get_weather"
    assert all(set(t) == {"name", "description"} for t in found["tools"])
    listed = await meta[TOOL_SEARCH].execute({"query": "", "limit": 2}, CONTEXT)
    assert len(listed["tools"]) == 2
    inspected = await meta[TOOL_INSPECT].execute({"name": "get_weather"}, CONTEXT)
    assert inspected["input_schema"]["properties"] == {"q": {"type": "string"}}
    result = await meta[TOOL_INVOKE].execute(
        {"name": "get_weather", "arguments": {"q": "Oslo"}}, CONTEXT
    )
    assert result == {
        "tool": "get_weather",
        "arguments": {"q": "Oslo"},
        "call": "call-1::get_weather",
    }
    as_json = await meta[TOOL_INVOKE].execute(
        {"name": "heavy_0", "arguments": '{"q": "x"}'}, CONTEXT
    )
    assert as_json["arguments"] == {"q": "x"}


async def test_scenario_25_tool_invoke_refuses_gated_tools_and_names_outside_the_request() -> None:
    pool = _heavy_pool(5, 700)
    gated = _tool("mcp__fs__rm", gated=True, namespace="mcp:fs")
    meta = _meta([gated, *pool])
    with pytest.raises(ToolError, match="needs human approval"):
        await meta[TOOL_INVOKE].execute({"name": "mcp__fs__rm", "arguments": {}}, CONTEXT)
    with pytest.raises(ToolError, match="not available in this request"):
        await meta[TOOL_INVOKE].execute({"name": "mcp__other__x", "arguments": {}}, CONTEXT)
    with pytest.raises(ToolError, match="not available in this request"):
        await meta[TOOL_INSPECT].execute({"name": "ghost"}, CONTEXT)
    with pytest.raises(ToolError, match="meta-tool"):
        await meta[TOOL_INVOKE].execute({"name": TOOL_INVOKE, "arguments": {}}, CONTEXT)
    with pytest.raises(ToolError, match="must be an object"):
        await meta[TOOL_INVOKE].execute({"name": "heavy_1", "arguments": [1]}, CONTEXT)


async def test_tool_invoke_fails_closed_when_the_gating_predicate_throws() -> None:
    def explode(arguments: Mapping[str, Any]) -> bool:
        raise RuntimeError("predicate bug")

    async def execute(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        raise AssertionError("must not run")

    fragile = ToolEntry(
        name="fragile",
        description="a tool with a broken approval predicate",
        input_schema={"type": "object"},
        execute=execute,
        needs_approval=explode,
    )
    pool = _heavy_pool(5, 700)
    exposition = plan_exposition([fragile, *pool], context_window=None)
    assert fragile in exposition.inline
    invoke = {e.name: e for e in exposition.meta}[TOOL_INVOKE]
    with pytest.raises(ToolError, match="needs human approval"):
        await invoke.execute({"name": "fragile", "arguments": {}}, CONTEXT)
