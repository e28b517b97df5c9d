"""Loop features: small hook sets and stop conditions the runner plugs in.

``usage`` is the internal usage observer (one cumulative ``message-metadata`` chunk per step);
``steer_yield`` stops a turn cleanly at a step boundary when a steer is waiting.
"""

from __future__ import annotations
