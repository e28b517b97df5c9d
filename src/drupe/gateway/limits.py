"""Per-key scopes and budgets of the gateway: which models and agents a key may use, and its
requests-per-minute and tokens-per-day budgets.

* ``check_scope(record, model_id)`` -> None or the refusal message (403). A model is allowed when
  the key lists it exactly, or lists ``provider:*`` for its provider; an ``agent:<id>`` or
  ``agent-session:<id>`` model is checked against the key's agents instead
  (``check_agent_scope``; a session by its agent's id, resolved by the caller). A key limited
  to some models drives no agent unless its agents are listed too.
* ``KeyLimiter`` is a pure, clock-injected budget book. ``admit(key, now)`` counts one request
  against a sliding 60-second window and answers the seconds to wait when the key is over
  either budget (``Retry-After``); ``charge(key, tokens, now)`` adds the tokens a finished
  answer used to the key's UTC day. A request over budget is refused BEFORE anything starts;
  the answer that crosses the token budget still completes (its size is known only at its end),
  and the next request is refused until midnight UTC.

* ``seed(key_id, now, tokens)`` raises the key's count for today to ``tokens`` when that is
  more: the shell (``GatewayAccess``) seeds it from the stored usage of every node, so a restart
  or another node does not reset a day's budget. ``admit(..., count_requests=False)`` checks the
  token budget only (the request window is then kept elsewhere: Redis, in cluster mode).

The book never holds more than 60 s of request stamps per key.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

from drupe.ids import SESSION_PREFIX
from drupe.persistence.records import ApiKeyRecord

__all__ = ["AGENT_PREFIX", "SESSION_PREFIX", "KeyLimiter", "check_agent_scope", "check_scope"]

AGENT_PREFIX: Final = "agent:"
_WINDOW: Final = 60.0
_DAY: Final = 86_400.0


def check_scope(record: ApiKeyRecord | None, model_id: str) -> str | None:
    """Why ``record`` may not use ``model_id`` (None: it may). Agent models: see the caller."""
    if record is None or record.allowed_models is None:
        return None
    provider = model_id.split(":", 1)[0]
    for allowed in record.allowed_models:
        if allowed == model_id or allowed == f"{provider}:*" or allowed == "*":
            return None
    return f"this API key may not use model {model_id!r}"


def check_agent_scope(record: ApiKeyRecord | None, agent_id: str) -> str | None:
    """Why ``record`` may not drive agent ``agent_id`` (None: it may).

    A key limited to some models drives no agent unless its agents are named too (an agent
    would otherwise be a way around the model list).
    """
    if record is None:
        return None
    allowed = record.allowed_agents
    if allowed is None:
        if record.allowed_models is None:
            return None
        return "this API key is limited to some models and may drive no agent"
    if agent_id in allowed or "*" in allowed:
        return None
    return f"this API key may not use agent {agent_id!r}"


@dataclass(slots=True)
class _Book:
    stamps: deque[float] = field(default_factory=deque)
    day: int = -1
    tokens: int = 0


class KeyLimiter:
    """Request and token budgets per key (pure: the caller passes ``now``, epoch seconds)."""

    def __init__(self) -> None:
        self._books: dict[str, _Book] = {}

    def _book(self, key_id: str, now: float) -> _Book:
        book = self._books.setdefault(key_id, _Book())
        day = int(now // _DAY)
        if book.day != day:
            book.day, book.tokens = day, 0
        while book.stamps and book.stamps[0] <= now - _WINDOW:
            book.stamps.popleft()
        return book

    def admit(
        self, record: ApiKeyRecord | None, now: float, *, count_requests: bool = True
    ) -> tuple[int, str] | None:
        """Count one request; None when admitted, else ``(retry_after_s, message)``."""
        if record is None or (record.requests_per_minute is None and record.tokens_per_day is None):
            return None
        book = self._book(record.id, now)
        tpd = record.tokens_per_day
        if tpd is not None and book.tokens >= tpd:
            wait = (book.day + 1) * _DAY - now
            return _ceil(wait), f"token budget exhausted: {book.tokens} of {tpd} tokens per day"
        rpm = record.requests_per_minute if count_requests else None
        if rpm is not None and len(book.stamps) >= rpm:
            wait = book.stamps[len(book.stamps) - rpm] + _WINDOW - now
            return _ceil(wait), f"rate limit: {rpm} requests per minute"
        if rpm is not None:
            book.stamps.append(now)
        return None

    def seed(self, key_id: str, now: float, tokens: int) -> None:
        """Today's count of ``key_id`` is at least ``tokens`` (the stored usage of every node)."""
        book = self._book(key_id, now)
        book.tokens = max(book.tokens, tokens)

    def charge(self, record: ApiKeyRecord | None, tokens: int, now: float) -> None:
        """Add the tokens one answer used to the key's day."""
        if record is None or record.tokens_per_day is None or tokens <= 0:
            return
        self._book(record.id, now).tokens += tokens

    def tokens_today(self, key_id: str, now: float) -> int:
        return self._book(key_id, now).tokens if key_id in self._books else 0


def _ceil(seconds: float) -> int:
    whole = int(seconds)
    return max(1, whole + (1 if seconds > whole else 0))
