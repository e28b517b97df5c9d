"""``ClientToolBoard``: tools a client declared for a conversation (AG-UI ``RunAgentInput.tools``).

Contract:

* ``declare(conversation_id, tools)``: the client's tools for the conversation's next turns
  (replacing the previous declaration). ``entries(conversation_id)`` are the ``ToolEntry``s
  the turn runner advertises with the registry's: every call is approval-gated, so the agent
  loop ends the turn after the step that calls one (the call is the turn's pending tool call).
* ``provide(conversation_id, tool_call_id, output)``: the client's result. The caller then
  approves the pending call; the continuation "runs" the tool, whose ``execute`` returns the
  provided output (once), so the model continues with it. A call with no provided result is a
  ``ToolError``.
* Bounded: at most ``max_conversations`` conversations (the oldest declaration is dropped) and
  ``MAX_TOOLS`` tools each. In memory: a restart (or another cluster node) forgets the
  declarations, and a result sent after that fails its call with a ``ToolError``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drupe.errors import ToolError
from drupe.tools.base import ToolContext, ToolEntry

__all__ = ["MAX_TOOLS", "ClientTool", "ClientToolBoard"]

MAX_TOOLS = 64


@dataclass(frozen=True, slots=True)
class ClientTool:
    name: str
    description: str
    schema: Mapping[str, Any]


class ClientToolBoard:
    def __init__(self, *, max_conversations: int = 10_000) -> None:
        self.max_conversations = max_conversations
        self._tools: OrderedDict[str, list[ToolEntry]] = OrderedDict()
        self._results: dict[tuple[str, str], Any] = {}

    def declare(self, conversation_id: str, tools: Sequence[ClientTool]) -> None:
        if len(tools) > MAX_TOOLS:
            raise ToolError(f"at most {MAX_TOOLS} client tools per run, got {len(tools)}")
        self._tools.pop(conversation_id, None)
        if not tools:
            return
        self._tools[conversation_id] = [self._entry(conversation_id, t) for t in tools]
        while len(self._tools) > self.max_conversations:
            dropped, _ = self._tools.popitem(last=False)
            self._results = {k: v for k, v in self._results.items() if k[0] != dropped}

    def names(self, conversation_id: str) -> frozenset[str]:
        return frozenset(e.name for e in self._tools.get(conversation_id, ()))

    def entries(self, conversation_id: str) -> list[ToolEntry]:
        return list(self._tools.get(conversation_id, ()))

    def provide(self, conversation_id: str, tool_call_id: str, output: Any) -> None:
        self._results[(conversation_id, tool_call_id)] = output

    def _entry(self, conversation_id: str, tool: ClientTool) -> ToolEntry:
        async def execute(arguments: Mapping[str, Any], context: ToolContext) -> Any:
            key = (context.conversation_id, context.tool_call_id)
            if key not in self._results:
                raise ToolError(f"{tool.name!r} is a client tool: the client sent no result")
            return self._results.pop(key)

        schema = dict(tool.schema) if tool.schema else {"type": "object", "properties": {}}
        return ToolEntry(
            name=tool.name,
            description=tool.description,
            input_schema=schema,
            execute=execute,
            namespace="client",
            defer="never",
            needs_approval=lambda arguments: True,
        )
