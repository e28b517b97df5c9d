"""Agent runtime drivers: the contract (``base``), the explicit registry, and the drivers."""

from __future__ import annotations
