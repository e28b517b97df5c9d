"""Agent tasks: schedules, their runner, heartbeats, background runs (docs/lifecycles/tasks.md).

``service.TaskService`` is the entry point (the composition root starts one per runtime);
``runner`` fires due schedules on an injectable ``clock``; ``run`` executes one run through the
dispatcher with a ``sentinel`` and the ``delivery`` port's listeners; ``triggers`` and ``plan``
are the pure scheduling rules; ``heartbeat`` builds a heartbeat's prompt or its skip reason.
"""
