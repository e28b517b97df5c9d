"""``python -m drupe`` runs the command-line interface."""

from __future__ import annotations

from drupe.cli.main import main

main()
