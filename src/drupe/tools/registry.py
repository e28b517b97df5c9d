"""``ToolRegistry``: the process-wide map of tools by wire name, grouped in namespaces.

The registry owns registration and selection; it never executes a tool and never connects to
anything (MCP tools are synced into it from the catalog's cache). Selection is a pure function of
the registered entries, the requested names and a ``ToolScope``: each entry may carry an
``applies(scope)`` predicate, and a predicate that throws makes its entry inactive for that
request (fail closed), it never fails the request.

Namespaces are ``builtin``, ``web``, ``kb``, ``meta`` and ``mcp:<server-id>``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from drupe.errors import UsageError
from drupe.tools.base import ToolEntry

__all__ = ["FIXED_NAMESPACES", "AppliesPredicate", "ToolRegistry", "ToolScope", "is_namespace"]

logger = logging.getLogger(__name__)

FIXED_NAMESPACES = frozenset({"builtin", "web", "kb", "meta"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolScope:
    """What an ``applies`` predicate may look at when a request selects its tools."""

    conversation_id: str | None = None
    model_id: str | None = None
    assistant_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


AppliesPredicate = Callable[[ToolScope], bool]


def is_namespace(namespace: str) -> bool:
    """Return whether ``namespace`` is one the registry accepts."""
    if namespace in FIXED_NAMESPACES:
        return True
    prefix, _, server = namespace.partition(":")
    return prefix == "mcp" and bool(server)


@dataclass(slots=True)
class _Registered:
    entry: ToolEntry
    applies: AppliesPredicate | None


def _is_active(registered: _Registered, scope: ToolScope) -> bool:
    if registered.applies is None:
        return True
    try:
        return bool(registered.applies(scope))
    except Exception:  # isolation boundary: a throwing predicate means inactive
        logger.warning(
            "tool %r: applies() raised; the tool is inactive for this request",
            registered.entry.name,
            exc_info=True,
        )
        return False


class ToolRegistry:
    """Tools by wire name, in registration order, each in one namespace."""

    def __init__(self) -> None:
        self._by_name: dict[str, _Registered] = {}

    def register(
        self, entry: ToolEntry, *, applies: AppliesPredicate | None = None, replace: bool = False
    ) -> None:
        """Add ``entry``; a second tool with the same wire name is refused unless ``replace``."""
        if not is_namespace(entry.namespace):
            raise UsageError(
                f"tool {entry.name!r}: unknown namespace {entry.namespace!r} "
                "(expected builtin, web, kb, meta or mcp:<server>)"
            )
        if not entry.name:
            raise UsageError("a tool needs a non-empty wire name")
        if entry.name in self._by_name and not replace:
            raise UsageError(f"tool {entry.name!r} is already registered")
        self._by_name[entry.name] = _Registered(entry, applies)

    def unregister(self, name: str) -> bool:
        """Remove the tool named ``name``; return whether it was there."""
        return self._by_name.pop(name, None) is not None

    def unregister_namespace(self, namespace: str) -> int:
        """Remove every tool of ``namespace``; return how many were removed."""
        doomed = [n for n, r in self._by_name.items() if r.entry.namespace == namespace]
        for name in doomed:
            del self._by_name[name]
        return len(doomed)

    def sync_namespace(self, namespace: str, entries: Iterable[ToolEntry]) -> None:
        """Make ``namespace`` hold exactly ``entries`` (how MCP catalog snapshots land here)."""
        fresh = list(entries)
        for entry in fresh:
            if entry.namespace != namespace:
                raise UsageError(
                    f"tool {entry.name!r} is in namespace {entry.namespace!r}, not {namespace!r}"
                )
        self.unregister_namespace(namespace)
        for entry in fresh:
            self.register(entry)

    def get(self, name: str) -> ToolEntry | None:
        """Return the tool with wire name ``name``, or ``None``."""
        registered = self._by_name.get(name)
        return registered.entry if registered is not None else None

    def __getitem__(self, name: str) -> ToolEntry:
        registered = self._by_name.get(name)
        if registered is None:
            raise KeyError(name)
        return registered.entry

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[ToolEntry]:
        return (r.entry for r in list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> list[str]:
        """Every wire name, in registration order."""
        return list(self._by_name)

    def namespaces(self) -> list[str]:
        """Every namespace that holds at least one tool, in first-registration order."""
        return list(dict.fromkeys(r.entry.namespace for r in self._by_name.values()))

    def in_namespace(self, namespace: str) -> list[ToolEntry]:
        """The tools of ``namespace``, in registration order."""
        return [r.entry for r in self._by_name.values() if r.entry.namespace == namespace]

    def select(
        self, names: Collection[str] | None, scope: ToolScope | None = None
    ) -> list[ToolEntry]:
        """Return the active tools for one request, in registration order.

        ``names`` restricts the result to those wire names (unknown names are ignored: a
        tool that disappeared between requests is simply absent); ``None`` means every tool.
        An entry whose ``applies(scope)`` is false, or throws, is left out.
        """
        effective_scope = scope if scope is not None else ToolScope()
        wanted = None if names is None else frozenset(names)
        return [
            r.entry
            for r in list(self._by_name.values())
            if (wanted is None or r.entry.name in wanted) and _is_active(r, effective_scope)
        ]
