"""Terminal writes that do not give up: bounded retries in the terminal phase, then in the
background until the row has left ``pending``.

Owns ``WritePolicy`` (explicit limits), ``write_with_retries`` (the foreground part, awaited by
the persistence listener inside the manager's bounded terminal phase) and ``TerminalWriteRetrier``
(ONE owned task group that keeps retrying the writes the foreground gave up on).

Foreground: attempts are bounded by ``attempt_timeout``, separated by ``delays``, and all of them
by ``budget`` (keep it below ``StreamConfig.terminal_timeout``, which cancels the whole terminal
phase). Background (``submit``): the row is first moved to ``error`` (``mark``), then the full
write is retried with exponential backoff (``background_first_delay`` doubling up to
``background_max_delay``); it stops when the write succeeds, or after
``background_attempts`` failed writes once the ``error`` mark is in. Until the mark succeeds it
never stops, so a row never stays ``pending`` while the process lives (a crash leaves it to the
boot reconcile). At most ``max_background`` writes wait at a time; one more is refused (logged
and counted in ``refused``), never queued without a bound.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import anyio.abc

from drupe.errors import FencedWriteError
from drupe.lifetimes import TaskOwner

__all__ = ["TerminalWriteRetrier", "WritePolicy", "write_with_retries"]

log = logging.getLogger(__name__)

Write = Callable[[], Awaitable[None]]
Mark = Callable[[], Awaitable[bool]]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class WritePolicy:
    """Bounds of a terminal write's retries (seconds unless told)."""

    attempt_timeout: float = 10.0
    """Bound of one attempt."""
    delays: tuple[float, ...] = (0.05, 0.25, 1.0)
    """Pauses between foreground attempts (so ``len(delays) + 1`` attempts)."""
    budget: float = 20.0
    """Bound of every foreground attempt and pause together."""
    background_first_delay: float = 1.0
    background_max_delay: float = 30.0
    background_attempts: int = 20
    """Failed background writes after which a row that is already ``error`` is left as is."""
    max_background: int = 10_000
    """Writes that may wait in the background at a time."""

    @classmethod
    def within(cls, terminal_timeout: float) -> WritePolicy:
        """The default policy, its foreground bounds fitted into ``terminal_timeout``."""
        budget = terminal_timeout * 2 / 3
        return cls(budget=budget, attempt_timeout=min(10.0, budget / 2))

    def __post_init__(self) -> None:
        if self.attempt_timeout <= 0 or self.budget <= 0:
            raise ValueError("attempt_timeout and budget must be > 0")
        if any(delay < 0 for delay in self.delays) or self.background_first_delay < 0:
            raise ValueError("retry delays must be >= 0")
        if self.background_attempts < 1 or self.max_background < 1:
            raise ValueError("background_attempts and max_background must be >= 1")


async def write_with_retries(write: Write, policy: WritePolicy, *, label: str) -> None:
    """Run ``write`` until it succeeds, within the foreground bounds; raise the last failure.

    A timed-out attempt raises ``TimeoutError``. Cancellation from outside propagates. A
    ``FencedWriteError`` (cluster: a newer owner holds the conversation) is raised at once.
    """
    deadline = anyio.current_time() + policy.budget
    last: Exception | None = None
    for attempt in range(len(policy.delays) + 1):
        if attempt:
            pause = policy.delays[attempt - 1]
            if anyio.current_time() + pause >= deadline:
                break
            await anyio.sleep(pause)
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            break
        try:
            with anyio.fail_after(min(policy.attempt_timeout, remaining)):
                await write()
            return
        except FencedWriteError:
            raise  # final: a newer owner holds the conversation, no retry can succeed
        except Exception as err:  # isolation boundary: a failed attempt is retried
            last = err
            log.warning("writing %s failed (attempt %d)", label, attempt + 1, exc_info=True)
    raise last if last is not None else TimeoutError(f"no time left to write {label}")


class TerminalWriteRetrier(TaskOwner):
    """Keeps retrying terminal writes the foreground gave up on (``async with`` owns the task
    group; leaving it cancels what still waits: the boot reconcile settles those rows)."""

    def __init__(self, policy: WritePolicy | None = None, *, sleep: Sleep = anyio.sleep) -> None:
        self.policy = policy or WritePolicy()
        self._sleep = sleep
        self._waiting = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.succeeded = 0
        """Writes that succeeded in the background."""
        self.left_error = 0
        """Writes given up on after ``background_attempts`` (their rows are ``error``)."""
        self.refused = 0
        """Writes refused because ``max_background`` were already waiting."""

    async def _start_tasks(self, group: anyio.abc.TaskGroup) -> None:
        return None  # retries start their tasks as writes fail

    async def _before_cancel(self) -> None:
        if self._waiting:
            log.warning("shutdown: %d terminal write(s) left retrying", self._waiting)

    @property
    def waiting(self) -> int:
        return self._waiting

    def submit(self, write: Write, mark: Mark, *, label: str) -> bool:
        """Retry ``write`` in the background (after ``mark``); False when refused."""
        if self._owned_group is None or self._waiting >= self.policy.max_background:
            self.refused += 1
            log.error("terminal write of %s refused: %d already retrying", label, self._waiting)
            return False
        if self._waiting == 0:
            self._idle = anyio.Event()
        self._waiting += 1
        self._owned_group.start_soon(
            self._retry, write, mark, label, name=f"terminal write {label}"
        )
        return True

    async def wait_idle(self) -> None:
        """Wait until no write is retrying."""
        await self._idle.wait()

    async def _retry(self, write: Write, mark: Mark, label: str) -> None:
        policy = self.policy
        try:
            marked = await self._attempt_mark(mark, label)
            delay = policy.background_first_delay
            failures = 0
            while True:
                await self._sleep(delay)
                try:
                    with anyio.fail_after(policy.attempt_timeout):
                        await write()
                    self.succeeded += 1
                    log.info("terminal write of %s succeeded after %d retries", label, failures)
                    return
                except Exception:  # isolation boundary: keep retrying
                    failures += 1
                    log.warning("retry %d of %s failed", failures, label, exc_info=True)
                if not marked:
                    marked = await self._attempt_mark(mark, label)
                if marked and failures >= policy.background_attempts:
                    self.left_error += 1
                    log.error("gave up writing %s after %d retries: left error", label, failures)
                    return
                delay = min(max(delay * 2, 0.001), policy.background_max_delay)
        finally:
            self._waiting -= 1
            if self._waiting == 0:
                self._idle.set()

    async def _attempt_mark(self, mark: Mark, label: str) -> bool:
        try:
            with anyio.fail_after(self.policy.attempt_timeout):
                return await mark()
        except Exception:  # isolation boundary: the mark is retried with the write
            log.warning("marking %s error failed", label, exc_info=True)
            return False
