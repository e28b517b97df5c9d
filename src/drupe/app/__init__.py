"""Composition root: ``open_runtime(settings)`` wires every part of a running Drupe.

Start order, one opener per part: cluster node and cluster status (cluster mode) -> MCP
catalog -> database (migrations) -> boot reconciliation of crash leftovers (every ``pending``
row becomes ``error`` before the first admission; task runs left ``running`` become
``failed``, in cluster mode only this node's own) -> the stream layer (terminal-write retrier,
checkpointer, trace recorder, cluster leases and log writer, stream manager) -> drivers and the
agent-session host -> admission (the dispatcher over its context providers, the approval
service, the local ``Conversations`` port) -> in cluster mode the cluster port (routed
commands, takeover sweep) -> channels -> task service. Shutdown runs in reverse: live streams
are aborted and their partials persisted, then the checkpointer and the retrier stop, then the
database is closed. Nothing here decides anything; it only connects parts.
"""

from drupe.app.runtime import Runtime, open_runtime
from drupe.app.surfaces import channel_service, task_delivery

__all__ = ["Runtime", "channel_service", "open_runtime", "task_delivery"]
