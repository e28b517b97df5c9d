"""The agent loop behind the stream manager's runner seam, and the model check of admission.

* ``TurnRunner``: ``TurnSpec`` (streaming's view of a turn) -> ``TurnRequest`` (the agent
  loop's). Tools come from the registry and the MCP catalog's cache through ``prepare_tools``
  (never a connect on the turn path), with the cost gate applied for the model's context
  window; then the conversation's client-declared tools (``ClientToolBoard``: AG-UI), if any.
* ``ModelValidator``: refuses an unknown or unusable model id before anything is written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from drupe.admission.base import TurnSpec
from drupe.agent.models.registry import ModelRegistry
from drupe.agent.request import TurnRequest
from drupe.agent.runner import AgentRunner
from drupe.chunks.types import Chunk
from drupe.errors import ConfigError, ValidationError
from drupe.tools.client_tools import ClientToolBoard
from drupe.tools.registry import ToolRegistry
from drupe.tools.request import ToolRequest, prepare_tools

if TYPE_CHECKING:
    from drupe.tools.mcp.catalog import McpCatalog

__all__ = ["ModelValidator", "TurnRunner", "model_validator", "turn_runner"]


def turn_runner(agent: AgentRunner, **kwargs: Any) -> TurnRunner:
    """Adapt the agent loop to the stream manager's runner seam (``TurnSpec -> chunks``)."""
    return TurnRunner(agent, **kwargs)


class TurnRunner:
    """``TurnSpec`` (streaming's view of a turn) -> ``TurnRequest`` (the agent loop's).

    Tools come from the registry and the MCP catalog's cache through ``prepare_tools`` (never a
    connect on the turn path), with the cost gate applied for the model's context window.
    """

    def __init__(
        self,
        agent: AgentRunner,
        *,
        tools: ToolRegistry | None = None,
        catalog: McpCatalog | None = None,
        context_window: Callable[[str], int | None] = lambda model_id: None,
        client_tools: ClientToolBoard | None = None,
    ) -> None:
        self.agent = agent
        self.client_tools = client_tools
        self.tools = tools if tools is not None else ToolRegistry()
        self.catalog = catalog
        self.context_window = context_window

    def __call__(self, spec: TurnSpec) -> AsyncIterator[Chunk]:
        exposition = prepare_tools(
            self.tools,
            self.catalog,
            ToolRequest(context_window=self.context_window(spec.model_id)),
        )
        request = TurnRequest(
            conversation_id=spec.conversation_id,
            message_id=spec.message_id,
            model_id=spec.model_id,
            messages=list(spec.messages),
            system=exposition.prompt_section,
            tools=[*exposition.advertised, *self._client_tools(spec.conversation_id)],
            steer_pending=spec.steer_pending,
            wrap_last_user_as_steer=spec.is_steer,
        )
        return self.agent.stream(request)

    def _client_tools(self, conversation_id: str) -> list[Any]:
        board = self.client_tools
        return board.entries(conversation_id) if board is not None else []


def model_validator(models: ModelRegistry) -> ModelValidator:
    return ModelValidator(models)


class ModelValidator:
    """Refuses unknown or unusable model ids before anything is written."""

    def __init__(self, models: ModelRegistry) -> None:
        self.models = models

    def __call__(self, model_id: str) -> None:
        try:
            self.models.resolve(model_id)
        except ConfigError as err:
            raise ValidationError(str(err)) from err
