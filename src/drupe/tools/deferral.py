"""The cost gate: which of a request's tools are shown inline and which are deferred.

``plan_exposition`` is pure: it takes the request's selected entries and the model's context
window and returns an ``Exposition``. The rules (Cherry's ``shouldDefer`` and
``applyDeferExposition``):

- ``threshold = floor(window * 0.10)``; the window falls back to 32,000 tokens when unknown;
- ``always`` entries are always deferred, ``never`` entries stay inline;
- the whole ``auto`` pool is deferred iff it has ≥ 5 tools AND its cost > threshold AND its
  cost > 500 tokens; cost = ceil(Σ(len(name) + len(description) + len(json schema)) / 4);
- approval-gated entries (``needs_approval`` set) are never deferred, so the loop's approval
  path always sees them;
- a caller-supplied ``tool_search`` disables deferral entirely;
- when anything is deferred, the meta-tools ``tool_search``, ``tool_inspect`` and
  ``tool_invoke`` (``drupe.tools.meta``) and a ``<deferred-tools>`` prompt section are added.

This module never executes a tool.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from drupe.tools.base import ToolEntry
from drupe.tools.meta import TOOL_SEARCH, build_meta_tools

__all__ = [
    "DEFER_MIN_COUNT",
    "DEFER_MIN_TOKENS",
    "DEFER_WINDOW_FRACTION",
    "FALLBACK_CONTEXT_WINDOW",
    "Exposition",
    "defer_threshold",
    "plan_exposition",
    "render_deferred_section",
    "should_defer_auto_pool",
    "tool_cost",
    "tools_cost",
]

FALLBACK_CONTEXT_WINDOW = 32_000
DEFER_WINDOW_FRACTION = 0.10
DEFER_MIN_COUNT = 5
DEFER_MIN_TOKENS = 500
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Exposition:
    """What the model is shown for one request."""

    inline: list[ToolEntry]
    deferred: list[ToolEntry]
    meta: list[ToolEntry]
    prompt_section: str | None
    auto_cost: int = 0
    """Estimated token cost of the deferrable ``auto`` pool (for logs and ``drupe doctor``)."""
    threshold: int = 0

    @property
    def advertised(self) -> list[ToolEntry]:
        """The tools sent to the model: the inline ones, then the meta-tools."""
        return [*self.inline, *self.meta]


def _schema_chars(entry: ToolEntry) -> int:
    try:
        text = json.dumps(entry.input_schema, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(entry.input_schema)
    return len(text)


def _chars(entry: ToolEntry) -> int:
    return len(entry.name) + len(entry.description) + _schema_chars(entry)


def tool_cost(entry: ToolEntry) -> int:
    """Estimated tokens ``entry`` costs in a request: ceil(chars / 4)."""
    return math.ceil(_chars(entry) / _CHARS_PER_TOKEN)


def tools_cost(entries: Iterable[ToolEntry]) -> int:
    """Estimated tokens of a pool: the characters are summed first, then ceil(chars / 4)."""
    return math.ceil(sum(_chars(e) for e in entries) / _CHARS_PER_TOKEN)


def defer_threshold(context_window: int | None) -> int:
    """``floor(window * 0.10)``, with the 32,000-token fallback for an unknown window."""
    window = context_window if context_window is not None and context_window > 0 else None
    return math.floor((window or FALLBACK_CONTEXT_WINDOW) * DEFER_WINDOW_FRACTION)


def should_defer_auto_pool(count: int, cost: int, context_window: int | None) -> bool:
    """The gate: defer the whole ``auto`` pool iff count ≥ 5, cost > threshold and cost > 500."""
    return (
        count >= DEFER_MIN_COUNT
        and cost > defer_threshold(context_window)
        and cost > DEFER_MIN_TOKENS
    )


def _is_gated(entry: ToolEntry) -> bool:
    return entry.needs_approval is not None


def render_deferred_section(deferred: Sequence[ToolEntry]) -> str:
    """The ``<deferred-tools>`` system-prompt section that names every deferred tool."""
    lines = [
        "<deferred-tools>",
        "These tools are available but their schemas are not loaded. Use tool_search to find "
        "one, tool_inspect to read its arguments, and tool_invoke to call it.",
        *(entry.name for entry in deferred),
        "</deferred-tools>",
    ]
    return "\n".join(lines)


def plan_exposition(entries: Sequence[ToolEntry], *, context_window: int | None) -> Exposition:
    """Split a request's tools into inline and deferred ones and add the meta-tools if needed."""
    threshold = defer_threshold(context_window)
    if any(entry.name == TOOL_SEARCH for entry in entries):
        # The caller brings its own tool_search: deferral would shadow it, so show everything.
        return Exposition(list(entries), [], [], None, threshold=threshold)

    auto_pool = [e for e in entries if e.defer == "auto" and not _is_gated(e)]
    auto_cost = tools_cost(auto_pool)
    defer_auto = should_defer_auto_pool(len(auto_pool), auto_cost, context_window)

    inline: list[ToolEntry] = []
    deferred: list[ToolEntry] = []
    for entry in entries:
        if _is_gated(entry) or entry.defer == "never":
            inline.append(entry)
        elif entry.defer == "always" or defer_auto:
            deferred.append(entry)
        else:
            inline.append(entry)

    if not deferred:
        return Exposition(inline, [], [], None, auto_cost=auto_cost, threshold=threshold)
    meta = build_meta_tools(request_entries=entries, deferred=deferred)
    return Exposition(
        inline,
        deferred,
        meta,
        render_deferred_section(deferred),
        auto_cost=auto_cost,
        threshold=threshold,
    )
