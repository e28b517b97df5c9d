"""``GatewayAccess``: the key checks every ``/v1`` route shares (the thin shell over ``limits``).

* ``auth(dialect_error_body, allow_x_api_key)`` -> a FastAPI dependency that returns the
  caller's ``ApiKeyRecord`` (None when keys are not required); 401 in the dialect's shape.
* ``admit(record, model_id, error_body)``: the key's scope (403 naming the model or agent)
  then its budgets (429 with ``Retry-After`` in whole seconds and the dialect's
  ``rate_limit`` error body). Nothing has started when it raises.
* ``charge(record, model=, dialect=, caller=)`` -> the ``on_end`` callback of a response: the
  tokens the answer used go to the key's day budget, and the request (input and output tokens,
  model, dialect, key, the user it acted as, the UTC day) to the runtime's ``UsageMeter``
  (``GET /api/usage``'s ``gateway`` section; ``drupe keys usage``).

The clock is injected (epoch seconds) so tests drive budgets without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from drupe.admission.principal import Principal
from drupe.gateway.keys import KeyCache, key_dependency
from drupe.gateway.limits import (
    AGENT_PREFIX,
    SESSION_PREFIX,
    KeyLimiter,
    check_agent_scope,
    check_scope,
)
from drupe.gateway.prompt import GatewayError, GatewayFailure
from drupe.persistence.gateway_usage import UsageDelta
from drupe.persistence.gateway_usage_meter import TokenUsage
from drupe.persistence.records import ApiKeyRecord

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["ErrorBody", "GatewayAccess", "request_caller"]


def request_caller(request: Request) -> Principal | None:
    """The user a gateway request acts as: its key's owner (the identity gate resolved it), or
    the local admin with auth off; None when the request presented no user's credential."""
    principal: Principal | None = getattr(request.state, "principal", None)
    return principal


ErrorBody = Callable[[GatewayFailure], dict[str, Any]]


class GatewayAccess:
    """Authentication, scopes and budgets of the gateway routes of one app."""

    def __init__(self, runtime: Runtime, *, clock: Callable[[], float] = time.time) -> None:
        self.runtime = runtime
        self.clock = clock
        self.cache = KeyCache()
        self.limiter = KeyLimiter()

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
        self.check_budget(record, error_body)

    def check_budget(self, record: ApiKeyRecord | None, error_body: ErrorBody) -> None:
        over = self.limiter.admit(record, self.clock())
        if over is not None:
            retry_after, message = over
            raise GatewayError(
                GatewayFailure(429, "rate_limit", f"{message}; retry in {retry_after} s"),
                error_body,
                headers={"retry-after": str(retry_after)},
            )

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
