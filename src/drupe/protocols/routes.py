"""The protocol routers the app mounts: ``build_protocol_routers(runtime)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from drupe.gateway.access import GatewayAccess
from drupe.protocols.a2a.routes import build_a2a_router
from drupe.protocols.agui.routes import build_agui_router

if TYPE_CHECKING:
    from fastapi import APIRouter

    from drupe.app import Runtime

__all__ = ["REFUSAL_BODIES", "build_protocol_routers"]


def _run_error(status: int, message: str) -> dict[str, Any]:
    return {
        "type": "RUN_ERROR",
        "message": message,
        "code": "too_large" if status == 413 else "refused",
    }


def _jsonrpc_error(status: int, message: str) -> dict[str, Any]:
    # -32600 (invalid request), as a2a-sdk's dispatcher answers a body past its own limit.
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}


REFUSAL_BODIES: tuple[tuple[str, Callable[[int, str], dict[str, Any]]], ...] = (
    ("/ag-ui/", _run_error),
    ("/a2a/", _jsonrpc_error),
)
"""The guards' refusals (a body past the limit) under the protocol routes, in their shapes."""


def build_protocol_routers(
    runtime: Runtime, access: GatewayAccess | None = None
) -> list[APIRouter]:
    """AG-UI (``/ag-ui/{target}``) and A2A (agent cards, ``/a2a/{agent_id}``); ``access``: the
    gateway's key checks and budgets, shared with ``/v1``."""
    access = access or GatewayAccess(runtime)
    return [build_agui_router(runtime, access), build_a2a_router(runtime, access)]
