"""``TaskOwner``: the one way an object owns background tasks for its lifetime.

Contract: a subclass is an async context manager whose tasks live in ONE anyio task group.

* ``__aenter__`` opens the group, then awaits ``_start_tasks(group)`` (start the tasks there); if
  ``_start`` raises, the group is cancelled and closed before the error propagates.
* ``__aexit__`` runs, in this order and nowhere else written again:
  1. ``_before_cancel()``: work that needs the tasks still running (drain a queue, leave a
     context entered by ``_start_tasks``); it always goes on to 2, even when it raises;
  2. the group is cancelled and its tasks are awaited;
  3. ``_after_tasks()``: clean-up once no task runs any more (release leases, close clients),
     shielded and bounded by ``after_timeout`` seconds.
* ``task_group`` is the running group (for work started later, ``start_soon``).
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

import anyio
import anyio.abc

__all__ = ["TaskOwner"]


class TaskOwner:
    after_timeout: float = 5.0
    _owned_group: anyio.abc.TaskGroup | None = None

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        """Start the owner's tasks in ``group``."""

    async def _before_cancel(self) -> None:
        """Work on exit that needs the tasks still running."""

    async def _after_tasks(self) -> None:
        """Clean-up on exit once every task has ended."""

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        if self._owned_group is None:
            raise RuntimeError(f"{type(self).__name__} is not entered")
        return self._owned_group

    async def __aenter__(self) -> Self:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._owned_group = group
        try:
            await self._start_tasks(group)
        except BaseException:
            group.cancel_scope.cancel()
            self._owned_group = None
            await group.__aexit__(None, None, None)  # the tasks are cancelled and awaited
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group = self._owned_group
        if group is None:
            raise RuntimeError(f"{type(self).__name__} is not entered")
        try:
            await self._before_cancel()  # not shielded: it may close contexts it entered
        finally:
            group.cancel_scope.cancel()
            try:
                result = await group.__aexit__(exc_type, exc, tb)
            finally:
                self._owned_group = None
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.after_timeout):
                    await self._after_tasks()
        return result
