"""ToolRegistry: namespaces, wire-name lookups, selection with pure ``applies`` predicates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from drupe.errors import UsageError
from drupe.tools.base import ToolContext, ToolEntry
from drupe.tools.builtins import ToolSettings, builtin_tools, register_builtins
from drupe.tools.code_exec import PYTHON_EXEC
from drupe.tools.registry import ToolRegistry, ToolScope
from drupe.tools.request import ToolRequest, prepare_tools


async def _echo(arguments: Mapping[str, Any], context: ToolContext) -> Any:
    return dict(arguments)


def _entry(name: str, namespace: str = "builtin") -> ToolEntry:
    return ToolEntry(
        name=name,
        description=f"the {name} tool",
        input_schema={"type": "object", "properties": {}},
        execute=_echo,
        namespace=namespace,
    )


def test_register_lookup_and_namespaces() -> None:
    registry = ToolRegistry()
    registry.register(_entry("web_search", "web"))
    registry.register(_entry("kb_search", "kb"))
    registry.register(_entry("mcp__files__read", "mcp:files"))
    assert registry.get("kb_search") is not None
    assert registry["mcp__files__read"].namespace == "mcp:files"
    assert "web_search" in registry
    assert registry.get("nope") is None
    assert registry.names() == ["web_search", "kb_search", "mcp__files__read"]
    assert registry.namespaces() == ["web", "kb", "mcp:files"]
    assert [e.name for e in registry.in_namespace("kb")] == ["kb_search"]


def test_duplicates_and_bad_namespaces_are_refused() -> None:
    registry = ToolRegistry()
    registry.register(_entry("a"))
    with pytest.raises(UsageError, match="already registered"):
        registry.register(_entry("a"))
    registry.register(_entry("a", "web"), replace=True)
    assert registry["a"].namespace == "web"
    for bad in ("files", "mcp:", "mcp"):
        with pytest.raises(UsageError, match="unknown namespace"):
            registry.register(_entry("b", bad))


def test_unregister_and_sync_namespace() -> None:
    registry = ToolRegistry()
    registry.register(_entry("keep"))
    registry.sync_namespace("mcp:s", [_entry("mcp__s__a", "mcp:s"), _entry("mcp__s__b", "mcp:s")])
    registry.sync_namespace("mcp:s", [_entry("mcp__s__c", "mcp:s")])
    assert registry.names() == ["keep", "mcp__s__c"]
    with pytest.raises(UsageError):
        registry.sync_namespace("mcp:s", [_entry("x", "mcp:other")])
    assert registry.unregister("keep") is True
    assert registry.unregister("keep") is False
    assert registry.unregister_namespace("mcp:s") == 1
    assert len(registry) == 0


def test_select_by_names_and_scope() -> None:
    registry = ToolRegistry()
    registry.register(_entry("always_on"))
    registry.register(_entry("gpt_only"), applies=lambda scope: scope.model_id == "openai:gpt")
    registry.register(_entry("thrower"), applies=lambda scope: 1 / 0 > 0)
    gpt = ToolScope(model_id="openai:gpt")
    assert [e.name for e in registry.select(None, gpt)] == ["always_on", "gpt_only"]
    assert [e.name for e in registry.select(None, ToolScope(model_id="x:y"))] == ["always_on"]
    # A throwing predicate makes its entry inactive, never fails the request.
    assert "thrower" not in [e.name for e in registry.select(None)]
    # Unknown names are ignored; order is registration order, not request order.
    selected = registry.select(["gpt_only", "always_on", "ghost"], gpt)
    assert [e.name for e in selected] == ["always_on", "gpt_only"]
    assert registry.select([], gpt) == []


def test_code_execution_is_absent_by_default_and_present_when_enabled() -> None:
    assert builtin_tools() == []
    registry = ToolRegistry()
    register_builtins(registry)
    assert PYTHON_EXEC not in registry
    register_builtins(registry, ToolSettings(code_execution=True))
    entry = registry[PYTHON_EXEC]
    assert entry.namespace == "builtin"
    assert entry.defer == "never"
    assert entry.is_approval_gated({"code": "print(1)"})
    ungated = builtin_tools(
        ToolSettings(code_execution=True, code_execution_requires_approval=False)
    )
    assert [e.name for e in ungated] == [PYTHON_EXEC]
    assert ungated[0].needs_approval is None


def test_prepare_tools_without_mcp_selects_then_applies_the_cost_gate() -> None:
    registry = ToolRegistry()
    for i in range(5):
        registry.register(
            ToolEntry(
                name=f"big_{i}",
                description="y" * 400,
                input_schema={"type": "object"},
                execute=_echo,
            )
        )
    registry.register(_entry("small"))
    # ~5 x 105 tokens: over 10% of a 4,000-token window and over 500 tokens -> deferred.
    exposition = prepare_tools(registry, None, ToolRequest(context_window=4_000))
    assert [e.name for e in exposition.deferred] == [f"big_{i}" for i in range(5)] + ["small"]
    roomy = prepare_tools(registry, None, ToolRequest(context_window=200_000))
    assert roomy.deferred == [] and len(roomy.inline) == 6
    picked = prepare_tools(registry, None, ToolRequest(names=["small"], context_window=4_000))
    assert [e.name for e in picked.inline] == ["small"]
