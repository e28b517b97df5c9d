"""The HTTP edge: FastAPI app factory, UI-stream and REST routes, guards, static web UI.

Entry points: ``drupe.gateway.app.create_app`` and ``create_app_with_lifespan``.
"""

from __future__ import annotations
