"""The meta-tools a request gets when some of its tools are deferred.

- ``tool_search(query, limit?)`` -> the deferred tools whose name or description match, as
  ``{name, description}`` pairs;
- ``tool_inspect(name)`` -> ``{name, description, input_schema}`` of a tool of the request;
- ``tool_invoke(name, arguments)`` -> the tool's result.

The meta-tools close over one request's tool set: ``tool_invoke`` refuses a name outside that
set, a meta-tool, and any tool that is approval-gated for the given arguments (re-checked at call
time; a throwing predicate counts as gated, so it fails closed). A gated tool is always inline, so
the model can call it directly and the loop's approval path sees it. Refusals raise
``drupe.errors.ToolError``; the loop reports them as tool errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from drupe.errors import ToolError
from drupe.tools.base import ToolContext, ToolEntry

__all__ = [
    "META_TOOL_NAMES",
    "TOOL_INSPECT",
    "TOOL_INVOKE",
    "TOOL_SEARCH",
    "build_meta_tools",
    "search_tools",
]

TOOL_SEARCH = "tool_search"
TOOL_INSPECT = "tool_inspect"
TOOL_INVOKE = "tool_invoke"
META_TOOL_NAMES = frozenset({TOOL_SEARCH, TOOL_INSPECT, TOOL_INVOKE})
_DEFAULT_LIMIT = 8
_MAX_LIMIT = 50
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def search_tools(
    pool: Sequence[ToolEntry], query: str, limit: int = _DEFAULT_LIMIT
) -> list[dict[str, str]]:
    """Rank ``pool`` against ``query`` (name words weigh double); empty query lists the pool."""
    limit = max(1, min(limit, _MAX_LIMIT))
    terms = _words(query)
    if not terms:
        return [{"name": e.name, "description": e.description} for e in pool[:limit]]
    scored: list[tuple[int, int, ToolEntry]] = []
    for index, entry in enumerate(pool):
        name_words = _words(entry.name.replace("__", " "))
        description_words = _words(entry.description)
        score = sum(2 * (t in name_words) + (t in description_words) for t in terms)
        if query.strip().lower() == entry.name.lower():
            score += 100
        if score:
            scored.append((-score, index, entry))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [{"name": e.name, "description": e.description} for _, _, e in scored[:limit]]


def _string_argument(arguments: Mapping[str, Any], key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str) or not value:
        raise ToolError(f"argument {key!r} must be a non-empty string")
    return value


def _object_argument(arguments: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = arguments.get(key, {})
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(f"argument {key!r} is not a JSON object: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ToolError(f"argument {key!r} must be an object")
    return value


def build_meta_tools(
    *, request_entries: Sequence[ToolEntry], deferred: Sequence[ToolEntry]
) -> list[ToolEntry]:
    """Return ``tool_search``, ``tool_inspect`` and ``tool_invoke`` bound to one request."""
    by_name = {e.name: e for e in request_entries if e.name not in META_TOOL_NAMES}
    deferred_pool = list(deferred)

    def lookup(name: str) -> ToolEntry:
        entry = by_name.get(name)
        if entry is None:
            raise ToolError(f"tool {name!r} is not available in this request")
        return entry

    async def tool_search(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        query = arguments.get("query", "")
        if not isinstance(query, str):
            raise ToolError("argument 'query' must be a string")
        limit = arguments.get("limit", _DEFAULT_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise ToolError("argument 'limit' must be an integer")
        return {"tools": search_tools(deferred_pool, query, limit)}

    async def tool_inspect(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        entry = lookup(_string_argument(arguments, "name"))
        return {
            "name": entry.name,
            "description": entry.description,
            "input_schema": dict(entry.input_schema),
        }

    async def tool_invoke(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        name = _string_argument(arguments, "name")
        if name in META_TOOL_NAMES:
            raise ToolError(f"tool_invoke cannot call the meta-tool {name!r}")
        entry = lookup(name)
        inner_arguments = _object_argument(arguments, "arguments")
        if entry.is_approval_gated(inner_arguments):
            raise ToolError(
                f"tool {name!r} needs human approval and cannot be called through tool_invoke; "
                "call it directly"
            )
        inner_context = replace(context, tool_call_id=f"{context.tool_call_id}::{name}")
        return await entry.execute(inner_arguments, inner_context)

    return [
        ToolEntry(
            name=TOOL_SEARCH,
            description=(
                "Search the deferred tools by keywords. Returns matching tool names and "
                "descriptions; use tool_inspect to read a tool's arguments."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "keywords"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": _MAX_LIMIT},
                },
                "required": ["query"],
            },
            execute=tool_search,
            namespace="meta",
            defer="never",
        ),
        ToolEntry(
            name=TOOL_INSPECT,
            description="Return the description and JSON schema of the arguments of a tool.",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
            execute=tool_inspect,
            namespace="meta",
            defer="never",
        ),
        ToolEntry(
            name=TOOL_INVOKE,
            description=(
                "Call a deferred tool by name with an arguments object that matches the schema "
                "tool_inspect returned."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "arguments": {"type": "object"},
                },
                "required": ["name", "arguments"],
            },
            execute=tool_invoke,
            namespace="meta",
            defer="never",
        ),
    ]
