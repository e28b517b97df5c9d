"""Triggers: when a schedule fires. Pure: no clock, no I/O; times are timezone-aware UTC.

Three kinds, stored as JSON on the schedule row:

* ``{"kind": "cron", "expr": "0 9 * * 1-5", "timezone": "Europe/Berlin"}``: a five-field cron
  expression evaluated in an IANA time zone (default ``UTC``) by ``cronsim``, which follows
  Debian cron across daylight-saving changes (a time skipped by a spring-forward fires at the
  first valid minute after it; a repeated hour fires once);
* ``{"kind": "interval", "seconds": 3600, "anchor": "<ISO time>"}``: a fixed grid
  ``anchor + k * seconds`` (no drift; the anchor defaults to the time the schedule was created);
* ``{"kind": "once", "at": "2026-12-24T18:00:00+01:00"}``: one fire, then none.

``parse_trigger`` validates (a clear ``ValidationError`` per mistake); ``next_after(trigger, t)``
is the first occurrence strictly after ``t`` (None: no more occurrences); ``first_after`` is
the same for an occurrence strictly after ``now`` skipping any elapsed ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from drupe.errors import ValidationError

__all__ = [
    "MAX_INTERVAL_SECONDS",
    "MIN_INTERVAL_SECONDS",
    "CronTrigger",
    "IntervalTrigger",
    "OnceTrigger",
    "Trigger",
    "next_after",
    "parse_trigger",
]

MIN_INTERVAL_SECONDS: Final = 60
MAX_INTERVAL_SECONDS: Final = 366 * 24 * 3600


@dataclass(frozen=True, slots=True)
class CronTrigger:
    expr: str
    timezone: str = "UTC"

    def as_json(self) -> dict[str, Any]:
        return {"kind": "cron", "expr": self.expr, "timezone": self.timezone}


@dataclass(frozen=True, slots=True)
class IntervalTrigger:
    seconds: int
    anchor: datetime
    """The grid's origin."""

    def as_json(self) -> dict[str, Any]:
        return {"kind": "interval", "seconds": self.seconds, "anchor": self.anchor.isoformat()}


@dataclass(frozen=True, slots=True)
class OnceTrigger:
    at: datetime

    def as_json(self) -> dict[str, Any]:
        return {"kind": "once", "at": self.at.isoformat()}


Trigger = CronTrigger | IntervalTrigger | OnceTrigger


def parse_trigger(data: Mapping[str, Any], *, anchor: datetime) -> Trigger:
    """Validate a stored or submitted trigger; ``anchor``: the interval grid's default origin."""
    kind = data.get("kind")
    if kind == "cron":
        expr = data.get("expr")
        zone = data.get("timezone") or "UTC"
        if not isinstance(expr, str) or not expr.strip():
            raise ValidationError("trigger.expr: a cron expression is required")
        if not isinstance(zone, str):
            raise ValidationError("trigger.timezone must be an IANA time zone name")
        tz = _zone(zone)
        try:
            it = CronSim(expr.strip(), datetime.now(UTC).astimezone(tz))
        except CronSimError as err:
            raise ValidationError(f"trigger.expr: invalid cron expression: {err}") from err
        try:
            next(it)
        except StopIteration as err:
            raise ValidationError("trigger.expr: the cron expression never fires") from err
        return CronTrigger(expr.strip(), zone)
    if kind == "interval":
        seconds = data.get("seconds")
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise ValidationError("trigger.seconds must be an integer")
        if not MIN_INTERVAL_SECONDS <= seconds <= MAX_INTERVAL_SECONDS:
            raise ValidationError(
                f"trigger.seconds must be between {MIN_INTERVAL_SECONDS} and {MAX_INTERVAL_SECONDS}"
            )
        stored = data.get("anchor")
        if isinstance(stored, str):
            try:
                anchor = datetime.fromisoformat(stored).astimezone(UTC)
            except ValueError as err:
                raise ValidationError(f"trigger.anchor: not an ISO 8601 time: {stored!r}") from err
        return IntervalTrigger(seconds, anchor)
    if kind == "once":
        at = data.get("at")
        if not isinstance(at, str):
            raise ValidationError("trigger.at must be an ISO 8601 time with an offset")
        try:
            when = datetime.fromisoformat(at)
        except ValueError as err:
            raise ValidationError(f"trigger.at: not an ISO 8601 time: {at!r}") from err
        if when.tzinfo is None:
            raise ValidationError("trigger.at needs a UTC offset (e.g. 2026-12-24T18:00:00Z)")
        return OnceTrigger(when.astimezone(UTC))
    raise ValidationError("trigger.kind must be 'cron', 'interval' or 'once'")


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValidationError(f"trigger.timezone: unknown time zone {name!r}") from err


def next_after(trigger: Trigger, after: datetime) -> datetime | None:
    """The first occurrence strictly after ``after`` (UTC), or None when there is none."""
    if isinstance(trigger, CronTrigger):
        tz = ZoneInfo(trigger.timezone)
        # cronsim works at minute resolution and yields strictly later minutes.
        start = after.astimezone(tz).replace(second=0, microsecond=0)
        try:
            return next(CronSim(trigger.expr, start)).astimezone(UTC)
        except StopIteration:
            return None
    if isinstance(trigger, IntervalTrigger):
        step = timedelta(seconds=trigger.seconds)
        if after < trigger.anchor:
            return trigger.anchor + step
        elapsed = (after - trigger.anchor) // step
        return trigger.anchor + (elapsed + 1) * step
    return trigger.at if trigger.at > after else None
