"""A2A push notifications: signed, delivered at least once (the SDK's config store, Drupe's sender).

Contract:

* A notification is a ``POST`` of the task's ``StreamResponse`` JSON (``{"task": {...}}``) to
  the config's ``url``, sent when the task reaches its end state (``completed``,
  ``canceled``, ``failed``, ``input-required``).
* Signed as the webhook channel signs (``drupe.channels.signing``): ``X-Drupe-Timestamp`` and
  ``X-Drupe-Signature = sha256=HMAC(token, "<timestamp>." + body)`` with the config's
  ``token`` as the key (a config without a token is refused). The token also goes as
  ``X-A2A-Notification-Token``, and the config's ``authentication`` as ``Authorization``.
* At least once: a connection failure or a non-2xx answer is retried after ``delays`` (0.2 s
  doubling to 30 s; 9 attempts, about a minute), each attempt re-signed with a fresh
  timestamp. A receiver must accept a notification twice (the task id and state make it
  idempotent).
* Configs live in the process (``InMemoryPushNotificationConfigStore``): a restart forgets
  them (the tasks themselves survive).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import httpx
from a2a.types.a2a_pb2 import StreamResponse, Task, TaskPushNotificationConfig
from google.protobuf.json_format import MessageToJson

from drupe.channels.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

__all__ = ["DEFAULT_DELAYS", "PushSender", "notification"]

log = logging.getLogger(__name__)

DEFAULT_DELAYS: tuple[float, ...] = (0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 30.0)
"""Waits between attempts (so 9 attempts)."""
TOKEN_HEADER = "X-A2A-Notification-Token"


@dataclass(frozen=True, slots=True)
class Notification:
    url: str
    headers: dict[str, str]
    body: bytes


def notification(config: TaskPushNotificationConfig, task: Task, *, now: float) -> Notification:
    """The signed request of one attempt (pure)."""
    body = MessageToJson(StreamResponse(task=task), indent=None).encode()
    stamp = str(int(now))
    headers = {
        "content-type": "application/json",
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: sign(config.token, stamp, body),
        TOKEN_HEADER: config.token,
    }
    auth = config.authentication
    if config.HasField("authentication") and auth.scheme and auth.credentials:
        headers["authorization"] = f"{auth.scheme} {auth.credentials}"
    return Notification(config.url, headers, body)


class PushSender:
    def __init__(
        self,
        *,
        delays: Sequence[float] = DEFAULT_DELAYS,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        timeout: float = 10.0,
    ) -> None:
        self.delays = tuple(delays)
        self.clock = clock
        self.sleep = sleep
        self.timeout = timeout

    async def deliver(self, config: TaskPushNotificationConfig, task: Task) -> bool:
        """Send until a 2xx answer or the attempts run out; returns whether it arrived."""
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            for attempt, delay in enumerate((*self.delays, None), start=1):
                request = notification(config, task, now=self.clock())
                try:
                    response = await client.post(
                        request.url, content=request.body, headers=request.headers
                    )
                    if response.is_success:
                        return True
                    reason = f"HTTP {response.status_code}"
                except httpx.HTTPError as err:
                    reason = type(err).__name__
                if delay is None:
                    log.warning(
                        "push notification of task %s to %s failed %d times (%s); giving up",
                        task.id,
                        config.url,
                        attempt,
                        reason,
                    )
                    return False
                await self.sleep(delay)
        return False
