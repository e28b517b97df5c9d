"""Schemathesis over the served OpenAPI document: no input may make the server answer 5xx.

The server is ``create_app_with_lifespan`` on a real uvicorn in a background thread (its own
event loop, the runtime opened by the lifespan), so schemathesis' synchronous client can call
it. Excluded: ``GET /api/conversations/{id}/events``, an endless SSE stream by design (its
errors are tested in ``test_events``/``test_rest``), and the OpenAI/Anthropic ``/v1`` routes
(their own suite covers them). ``POST /api/chat`` IS fuzzed: generated turns run on the
scripted echo model and end at once.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings

from drupe.gateway.app import create_app_with_lifespan
from tests.gateway.conftest import make_settings


@pytest.fixture(scope="module")
def served_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("schemathesis")
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
        .exclude(path="/api/conversations/{conversation_id}/events")
    )


def test_no_input_makes_a_server_error(api_schema: schemathesis.BaseSchema) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 12
    failures: list[str] = []
    calls: dict[str, int] = {}
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
            response = case.call(timeout=20)
            label = case.operation.label
            calls[label] = calls.get(label, 0) + 1
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code}")

        fuzz()
    assert not failures, failures
    assert "POST /api/chat" in calls and len(calls) == len(operations), calls
    assert sum(calls.values()) >= 10 * len(operations), calls
