"""Agent sessions: the host (a pure reducer plus a thin shell) and the runtime drivers.

* ``state`` / ``reducer``: every decision, pure (``reduce(state, event) -> (state, effects)``);
* ``host``: the shell that performs the effects (turn streams, idle timer, approvals, stop);
* ``connections``: single-flight ``ensure``, reconcile, the runtime event reader;
* ``launch``: queued turns and steer continuations; ``agent_edits``: pushed agent edits;
* ``listeners``: the session persistence backend and the ``agent-runtime:`` terminal listener;
* ``drivers``: the contract (``base``), the explicit registry, and the drivers.

Nothing is registered at import time. See ``docs/lifecycles/agent-session.md``.
"""

from __future__ import annotations
