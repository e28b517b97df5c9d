"""Schemathesis over the served OpenAPI document: no input may make the server answer 5xx.

The server is ``create_app_with_lifespan`` on a real uvicorn in a background thread (its own
event loop, the runtime opened by the lifespan), so schemathesis' synchronous client can call
it. Excluded: ``GET /api/conversations/{id}/events``, an endless SSE stream by design (its
errors are tested in ``test_events``/``test_rest``). ``POST /api/chat`` IS fuzzed: generated
turns run on the scripted echo model and end at once.

The gateway routes of issue 10 (Responses API, stored responses, ``/v1/agents``, ``/v1/mcps``,
``/{provider}/v1/messages``) are fuzzed with a valid API key, so generated bodies get past the
key check and reach the parsers; the older OpenAI/Anthropic routes have their own suite.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings

from drupe.api.app_factory import create_app_with_lifespan
from drupe.persistence.db import open_database
from tests.gateway.conftest import make_settings

GATEWAY_ROUTES = r"^/(v1/responses|v1/agents|v1/mcps|\{provider\}/v1/messages)"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("schemathesis")


@pytest.fixture(scope="module")
def served_url(data_dir: Path) -> Iterator[str]:
    app = create_app_with_lifespan(make_settings(data_dir))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, http="httptools")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


@pytest.fixture(scope="module")
def api_schema(served_url: str) -> schemathesis.BaseSchema:
    return (
        schemathesis.openapi.from_url(f"{served_url}/openapi.json")
        .exclude(path_regex=r"^/v1/")
        .exclude(path_regex=GATEWAY_ROUTES)
        .exclude(path="/api/conversations/{conversation_id}/events")
    )


@pytest.fixture(scope="module")
def gateway_key(served_url: str, data_dir: Path) -> str:
    async def create() -> str:
        async with open_database(data_dir=data_dir) as db:
            key, _ = await db.api_keys.create("schemathesis")
            return key

    return anyio.run(create)


@pytest.fixture(scope="module")
def gateway_schema(served_url: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{served_url}/openapi.json").include(
        path_regex=GATEWAY_ROUTES
    )


def fuzz_operations(
    schema: schemathesis.BaseSchema, headers: dict[str, str] | None = None
) -> tuple[list[str], dict[str, int], set[int]]:
    """Fuzz every operation of ``schema``: (5xx failures, calls per operation, statuses)."""
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    calls: dict[str, int] = {}
    statuses: set[int] = set()
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def fuzz(case: schemathesis.Case) -> None:
            response = case.call(timeout=20, headers=headers)
            label = case.operation.label
            calls[label] = calls.get(label, 0) + 1
            statuses.add(response.status_code)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code}")

        fuzz()
    assert len(calls) == len(operations), calls
    return failures, calls, statuses


def test_no_input_makes_a_server_error(api_schema: schemathesis.BaseSchema) -> None:
    failures, calls, _ = fuzz_operations(api_schema)
    assert len(calls) >= 12
    assert not failures, failures
    assert "POST /api/chat" in calls, calls
    assert sum(calls.values()) >= 10 * len(calls), calls


def test_no_input_to_the_new_gateway_routes_makes_a_server_error(
    gateway_schema: schemathesis.BaseSchema, gateway_key: str
) -> None:
    failures, calls, statuses = fuzz_operations(
        gateway_schema, {"authorization": f"Bearer {gateway_key}"}
    )
    assert len(calls) == 9, calls
    assert not failures, failures
    assert "POST /v1/responses" in calls, calls
    assert "GET /v1/responses/{response_id}/input_items" in calls, calls
    assert "POST /{provider}/v1/messages/count_tokens" in calls, calls
    assert sum(calls.values()) >= 10 * len(calls), calls
    assert {200, 400, 404} <= statuses, statuses  # the key worked: bodies reached the parsers
