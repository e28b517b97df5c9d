"""Drupe: a self-hosted AI conversation runtime in which the server owns every live stream.

The public API is deliberately small; see ``docs/architecture.md`` for the map of the tree.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
