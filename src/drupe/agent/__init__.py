"""The in-process agent: the loop, its hooks and features, and the model layer (``agent.models``).

This package never imports the web framework, SQL or Redis (enforced by import-linter).
"""

from __future__ import annotations
