"""The protocol routers the app mounts: ``build_protocol_routers(runtime)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drupe.protocols.a2a.routes import build_a2a_router
from drupe.protocols.agui.routes import build_agui_router

if TYPE_CHECKING:
    from fastapi import APIRouter

    from drupe.app import Runtime

__all__ = ["build_protocol_routers"]


def build_protocol_routers(runtime: Runtime) -> list[APIRouter]:
    """AG-UI (``/ag-ui/{target}``) and A2A (agent cards, ``/a2a/{agent_id}``)."""
    return [build_agui_router(runtime), build_a2a_router(runtime)]
