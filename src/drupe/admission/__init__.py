"""Who prepares a turn: dispatch picks a context provider, which validates, writes the rows and
builds the listeners and executions; only dispatch calls ``StreamManager.send``."""

from __future__ import annotations
