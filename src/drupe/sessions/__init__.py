"""Agent sessions: the host (a pure reducer plus a thin shell) and the runtime drivers.

See issue 5 and ``docs/lifecycles/agent-session.md`` (to come); nothing is registered here yet.
"""

from __future__ import annotations
