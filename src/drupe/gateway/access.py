"""``GatewayAccess``: the key checks every ``/v1`` route shares (the thin shell over ``limits``).

* ``auth(dialect_error_body, allow_x_api_key)`` -> a FastAPI dependency that returns the
  caller's ``ApiKeyRecord`` (None when keys are not required); 401 in the dialect's shape.
* ``admit(record, model_id, error_body)``: the key's scope (403 naming the model or agent)
  then its budgets (``check_budget``: 429 with ``Retry-After`` in whole seconds and the
  dialect's ``rate_limit`` error body). Nothing has started when it raises.
* Budgets hold across restarts and nodes: a key's tokens of the day are read from the stored
  usage of every node (plus what this node has not written yet) at most every
  ``refresh_seconds`` (5 s) while the key is used; in cluster mode the requests-per-minute
  window is one window in Redis for every node (``SharedRequestWindow``), and while Redis is
  unreachable each node keeps its own (logged once per outage).
* ``charge(record, model=, dialect=, caller=)`` -> the ``on_end`` callback of a response: the
  tokens the answer used go to the key's day budget, and the request (input and output tokens,
  model, dialect, key, the user it acted as, the UTC day) to the runtime's ``UsageMeter``
  (``GET /api/usage``'s ``gateway`` section; ``drupe keys usage``).

The clock is injected (epoch seconds) so tests drive budgets without sleeping.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from limits.errors import StorageError
from starlette.requests import Request

from drupe.admission.principal import Principal
from drupe.errors import PersistenceError
from drupe.gateway.keys import KeyCache, key_dependency
from drupe.gateway.limits import (
    AGENT_PREFIX,
    SESSION_PREFIX,
    KeyLimiter,
    check_agent_scope,
    check_scope,
)
from drupe.gateway.prompt import GatewayError, GatewayFailure
from drupe.gateway.request_window import SharedRequestWindow
from drupe.persistence.gateway_usage import UsageDelta
from drupe.persistence.gateway_usage_meter import TokenUsage
from drupe.persistence.records import ApiKeyRecord

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["DAY_REFRESH_SECONDS", "ErrorBody", "GatewayAccess", "request_caller"]

log = logging.getLogger(__name__)

DAY_REFRESH_SECONDS: Final = 5.0
"""How stale a key's count of tokens today may be (read from the stored usage of every node)."""


def request_caller(request: Request) -> Principal | None:
    """The user a gateway request acts as: its key's owner (the identity gate resolved it), or
    the local admin with auth off; None when the request presented no user's credential."""
    principal: Principal | None = getattr(request.state, "principal", None)
    return principal


ErrorBody = Callable[[GatewayFailure], dict[str, Any]]


class GatewayAccess:
    """Authentication, scopes and budgets of the gateway routes of one app."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        clock: Callable[[], float] = time.time,
        refresh_seconds: float = DAY_REFRESH_SECONDS,
    ) -> None:
        self.runtime = runtime
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self.cache = KeyCache()
        self.limiter = KeyLimiter()
        cluster = runtime.settings.cluster
        self.window = (
            SharedRequestWindow(cluster.redis_url, key_prefix=cluster.key_prefix)
            if cluster.redis_url is not None
            else None
        )
        self._seeded: dict[str, float] = {}
        self._outage = False

    async def aclose(self) -> None:
        """Disconnect the shared request window from Redis (the app's shutdown)."""
        if self.window is not None:
            await self.window.aclose()

    def auth(
        self, error_body: ErrorBody, *, allow_x_api_key: bool
    ) -> Callable[[Request], Awaitable[ApiKeyRecord | None]]:
        return key_dependency(
            self.runtime, error_body, allow_x_api_key=allow_x_api_key, cache=self.cache
        )

    async def agent_of(self, model_id: str) -> str | None:
        """The agent id an ``agent:``/``agent-session:`` model names (None: not an agent)."""
        if model_id.startswith(AGENT_PREFIX):
            return model_id[len(AGENT_PREFIX) :]
        if model_id.startswith(SESSION_PREFIX):
            session_id = model_id[len(SESSION_PREFIX) :]
            record = await self.runtime.db.agents.get_session(session_id) if session_id else None
            return record.agent_id if record is not None else ""
        return None

    async def admit(
        self, record: ApiKeyRecord | None, model_id: str, error_body: ErrorBody
    ) -> None:
        """Refuse a model or agent outside the key's scope (403), or a key over budget (429)."""
        agent_id = await self.agent_of(model_id)
        if agent_id is None:
            refusal = check_scope(record, model_id)
        elif agent_id:
            refusal = check_agent_scope(record, agent_id)
        else:
            refusal = None  # an unknown session: the turn answers 404
        if refusal is not None:
            raise GatewayError(GatewayFailure(403, "forbidden", refusal), error_body)
        await self.check_budget(record, error_body)

    async def check_budget(self, record: ApiKeyRecord | None, error_body: ErrorBody) -> None:
        """429 when the key is over its tokens of the day or its requests per minute."""
        now = self.clock()
        if record is not None and record.tokens_per_day is not None:
            await self._seed_day(record.id, now)
        window = self.window
        over = self.limiter.admit(record, now, count_requests=window is None)
        if over is None and window is not None and record and record.requests_per_minute:
            try:
                over = await window.admit(record.id, record.requests_per_minute)
                self._outage = False
            except StorageError as err:
                self._lost(err)
                over = self.limiter.admit(record, now)  # this node's own window meanwhile
        if over is not None:
            retry_after, message = over
            raise GatewayError(
                GatewayFailure(429, "rate_limit", f"{message}; retry in {retry_after} s"),
                error_body,
                headers={"retry-after": str(retry_after)},
            )

    async def _seed_day(self, key_id: str, now: float) -> None:
        """Raise the key's count of today to every node's stored usage (at most every
        ``refresh_seconds``); a failed read keeps the node's own count."""
        last = self._seeded.get(key_id)
        if last is not None and 0 <= now - last < self.refresh_seconds:
            return
        if len(self._seeded) > 10_000:  # bounded: keys seen in the last refresh_seconds
            self._seeded.clear()
        self._seeded[key_id] = now
        day = datetime.fromtimestamp(now, UTC).date()
        meter = self.runtime.gateway_usage
        unwritten = meter.unwritten_tokens(key_id, day) if meter is not None else 0
        try:
            stored = await self.runtime.db.gateway_usage.tokens_on(day, key_id)
        except PersistenceError as err:
            log.warning("gateway budget: could not read the stored usage (%s)", err)
            return
        self.limiter.seed(key_id, now, stored + unwritten)

    def _lost(self, err: StorageError) -> None:
        if not self._outage:
            self._outage = True
            log.warning("gateway request windows counted per node: Redis unreachable (%s)", err)

    def charge(
        self,
        record: ApiKeyRecord | None,
        *,
        model: str,
        dialect: str,
        caller: Principal | None = None,
    ) -> Callable[[TokenUsage], None]:
        """The ``on_end`` of one request: budget and usage (the user is ``caller``, else the
        key's owner)."""
        owner = caller.user_id if caller is not None else record.owner_id if record else None

        def on_end(used: TokenUsage) -> None:
            now = self.clock()
            self.limiter.charge(record, used.total, now)
            meter = self.runtime.gateway_usage
            if meter is not None:
                meter.record(
                    UsageDelta(
                        day=datetime.fromtimestamp(now, UTC).date(),
                        key_id=record.id if record is not None else None,
                        owner_id=owner,
                        model=model,
                        dialect=dialect,
                        input_tokens=used.input_tokens,
                        output_tokens=used.output_tokens,
                    )
                )

        return on_end
