"""The harness itself: a node keeps serving after it wrote more to stdout than a pipe holds.

uvicorn writes its access log to stdout, which the harness reads for the boot announce. A pipe
nobody drains fills after ~1,000 requests (64 KiB) and the node then blocks in its next log
line, so a long multi-node test or ``bench/cluster_fanout.py`` would hang.
"""

from __future__ import annotations

import httpx
import pytest

from tests.multinode.conftest import MakeCluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(180)]

REQUESTS = 2_000
"""About 120 KiB of access log: twice what a pipe buffers."""


def test_a_node_serves_more_requests_than_its_stdout_pipe_holds(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(size=1, balancer=False)
    (node,) = cluster.nodes
    with httpx.Client(base_url=node.url, timeout=30) as client:
        statuses = [client.get("/healthz").status_code for _ in range(REQUESTS)]
    assert statuses == [200] * REQUESTS
    assert cluster.log(node).count('"GET /healthz HTTP/1.1" 200') >= REQUESTS - 100
