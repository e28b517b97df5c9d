"""The wire vocabulary: Vercel AI SDK UI message stream v1 chunks (``ai`` v6 chunk set).

A chunk is a JSON object (a ``dict``) whose ``type`` key names it; ``types`` gives the typed
shapes, ``codec`` validates and serialises them, ``sse`` frames them, ``accumulate`` folds them
into a message, and ``replay`` compacts a buffered run for late subscribers. Everything here is
pure and synchronous, and never imports the web framework or the database.
"""

from __future__ import annotations

from drupe.chunks.types import Chunk, UIMessage, UIPart

__all__ = ["Chunk", "UIMessage", "UIPart"]
