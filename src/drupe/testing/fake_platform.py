"""What the fake IM platforms share: a call recorder, waits, and injected faults.

``PlatformRecorder`` records every API call a fake receives (``Call``: method and parameters,
in arrival order) and lets a test wait, without sleeping, until a predicate over the calls
holds (``wait_until``: woken on every recorded call). Faults are injected per method:
``fail_next(method, status, retry_after)`` answers the next call(s) with an error (429 carries
``retry_after``); ``hang(chat_id)`` holds every call addressed to that chat until ``release``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from starlette.requests import Request

__all__ = ["Call", "Fault", "PlatformRecorder", "request_params"]


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Fault:
    status: int
    retry_after: float | None = None
    description: str = ""


@dataclass
class PlatformRecorder:
    calls: list[Call] = field(default_factory=list)
    _faults: dict[str, deque[Fault]] = field(default_factory=dict)
    _hung: set[str] = field(default_factory=set)
    _released: anyio.Event = field(default_factory=anyio.Event)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def record(self, method: str, params: dict[str, Any]) -> None:
        self.calls.append(Call(method, params))
        self.notify()

    def notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_until(self, predicate: Callable[[], bool], within: float = 10.0) -> None:
        with anyio.fail_after(within):
            while not predicate():
                await self._changed.wait()

    # --- faults -------------------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int,
        *,
        retry_after: float | None = None,
        times: int = 1,
        description: str = "",
    ) -> None:
        queue = self._faults.setdefault(method, deque())
        for _ in range(times):
            queue.append(Fault(status, retry_after, description or f"HTTP {status}"))

    def take_fault(self, method: str) -> Fault | None:
        queue = self._faults.get(method)
        return queue.popleft() if queue else None

    def hang(self, chat_id: str) -> None:
        self._hung.add(str(chat_id))
        self._released = anyio.Event()

    def release(self) -> None:
        self._hung.clear()
        self._released.set()

    async def maybe_hang(self, chat_id: object) -> None:
        if str(chat_id) in self._hung:
            await self._released.wait()


async def request_params(request: Request) -> dict[str, Any]:
    """A platform API call's parameters: a JSON body, or form fields (JSON values decoded)."""
    if request.headers.get("content-type", "").startswith("application/json"):
        data = await request.json()
        return dict(data) if isinstance(data, dict) else {}
    form = await request.form()
    params: dict[str, Any] = {}
    for key, value in form.items():
        if not isinstance(value, str):
            continue
        try:
            params[key] = orjson.loads(value) if value[:1] in "[{" else value
        except orjson.JSONDecodeError:
            params[key] = value
    return params
