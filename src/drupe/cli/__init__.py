"""The ``drupe`` command (Typer + Rich): serve, chat, db, keys, doctor."""

from __future__ import annotations
