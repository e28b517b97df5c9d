"""The protocol routers the app mounts: ``build_protocol_routers(runtime)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drupe.protocols.agui.routes import build_agui_router

if TYPE_CHECKING:
    from fastapi import APIRouter

    from drupe.app import Runtime

__all__ = ["build_protocol_routers"]


def build_protocol_routers(runtime: Runtime) -> list[APIRouter]:
    """AG-UI (``/ag-ui/{target}``)."""
    return [build_agui_router(runtime)]
