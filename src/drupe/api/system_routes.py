"""Operational routes: models, status, MCP, health and Prometheus metrics.

``/metrics`` is rendered from a per-app ``CollectorRegistry`` whose one custom collector reads
``StreamManager.statistics()`` at scrape time (live streams, subscribers, chunks total,
terminal outcomes by status): nothing is counted twice and nothing global is registered, so
several apps (tests) can live in one process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from drupe.api.model_titles import get_titler
from drupe.http.state import get_board, get_caller, get_runtime, require_admin

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["ManagerCollector", "metrics_registry", "router"]

router = APIRouter(tags=["system"])


class StreamStatistics(Protocol):
    """What the metrics read: the stream manager's ``statistics()``."""

    def statistics(self) -> dict[str, Any]: ...


class ManagerCollector(Collector):
    """Prometheus view of one stream manager's statistics."""

    def __init__(self, manager: StreamStatistics) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Any]:
        stats = self.manager.statistics()
        live = GaugeMetricFamily("drupe_live_streams", "Conversations with a live stream.")
        live.add_metric([], stats["live_streams"])
        yield live
        streams = GaugeMetricFamily(
            "drupe_streams", "Streams in the registry (live or in their grace period)."
        )
        streams.add_metric([], stats["streams"])
        yield streams
        subscribers = GaugeMetricFamily("drupe_subscribers", "Attached subscribers.")
        subscribers.add_metric([], stats["subscribers"])
        yield subscribers
        records = GaugeMetricFamily(
            "drupe_status_records", "Conversation status records held (bounded)."
        )
        records.add_metric([], stats["status_records"])
        yield records
        failures = CounterMetricFamily(
            "drupe_save_failures",
            "Answers whose final save failed (subscribers got an error end).",
        )
        failures.add_metric([], stats["save_failures"])
        yield failures
        chunks = CounterMetricFamily("drupe_chunks", "Chunks fanned out since start.")
        chunks.add_metric([], stats["chunks_total"])
        yield chunks
        outcomes = CounterMetricFamily(
            "drupe_terminal_outcomes", "Execution terminals by status.", labels=["status"]
        )
        for status, count in sorted(stats["outcomes"].items()):
            outcomes.add_metric([status], count)
        yield outcomes


def metrics_registry(manager: StreamStatistics) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ManagerCollector(manager))
    return registry


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus metrics (text exposition format); an admin's (or a scraper's admin token)."""
    require_admin(request)
    registry: CollectorRegistry = request.app.state.metrics
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/api/models")
async def list_models(request: Request) -> dict[str, Any]:
    """The model picker: every known model and the default one."""
    runtime = get_runtime(request)
    return {
        "models": [info.to_json() for info in runtime.models.list_models()],
        "default": runtime.models.default_model_id(),
    }


async def _visible_statuses(request: Request) -> dict[str, str]:
    """The board's statuses, of the conversations the caller may read (an admin: all)."""
    statuses = dict(get_board(request).statuses)
    caller = get_caller(request)
    if caller.is_admin:
        return statuses
    # One query for the whole board (it is polled): stored conversations the member owns or
    # was shared; an ephemeral one by its owner.
    runtime = get_runtime(request)
    stored = await runtime.db.conversations.visible_among(statuses, caller.user_id)
    return {
        cid: state
        for cid, state in statuses.items()
        if cid in stored or _ephemeral_owner(runtime, cid) == caller.user_id
    }


def _ephemeral_owner(runtime: Runtime, conversation_id: str) -> str | None:
    conversation = runtime.ephemeral.get(conversation_id)
    return conversation.owner_id if conversation is not None else None


@router.get("/api/status")
async def status(request: Request) -> dict[str, Any]:
    """Live status of every conversation that had a stream (in cluster mode, on any node),
    plus this node's stream statistics."""
    runtime = get_runtime(request)
    stats = runtime.manager.statistics()
    return {
        "conversations": await _visible_statuses(request),
        "liveStreams": stats["live_streams"],
        "subscribers": stats["subscribers"],
        "chunksTotal": stats["chunks_total"],
        "outcomes": stats["outcomes"],
        "reconciledRows": runtime.reconciled_rows,
        "titled": get_titler(request).titled,
        "node": {
            **runtime.conversations.describe(),
        },
    }


@router.get("/api/mcp")
async def mcp_servers(request: Request) -> dict[str, Any]:
    """MCP servers and their status: state, tool count and names, last error (empty until MCP
    servers are configured)."""
    runtime = get_runtime(request)
    catalog = runtime.mcp
    servers = [status.as_dict() for status in catalog.status()] if catalog is not None else []
    return {"servers": servers}
