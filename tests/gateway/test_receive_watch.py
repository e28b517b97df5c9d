"""``ReceiveWatch``: a pending ``receive()`` stepped from its future's callbacks, no task.

The receive coroutines are real asyncio code (events, a bare ``sleep(0)`` yield, a raise);
the expectation is what an asyncio task awaiting the same ``receive()`` in a loop would see.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from drupe.http.receive_watch import ReceiveWatch
from drupe.http.sse_response import SseResponse
from drupe.streaming.listeners.sse import FrameBuffer


class _Server:
    """Messages queued by the test; ``receive`` waits on an asyncio event for each."""

    def __init__(self) -> None:
        self.queue: list[dict[str, Any]] = []
        self.ready = anyio.Event()
        self.cleaned = 0

    def put(self, message: dict[str, Any]) -> None:
        self.queue.append(message)
        self.ready.set()

    async def receive(self) -> dict[str, Any]:
        try:
            await asyncio.sleep(0)  # a bare yield: stepped again on the next loop pass
            while not self.queue:
                self.ready = anyio.Event()
                await self.ready.wait()
            return self.queue.pop(0)
        finally:
            self.cleaned += 1


async def test_messages_arrive_in_order_until_on_message_says_stop() -> None:
    server = _Server()
    seen: list[dict[str, Any] | None] = []
    done = anyio.Event()

    def on_message(message: dict[str, Any] | None) -> bool:
        seen.append(message)
        if message is None or message["type"] == "http.disconnect":
            done.set()
            return False
        return True

    watch = ReceiveWatch(server.receive, on_message)  # type: ignore[arg-type]
    tasks = len(asyncio.all_tasks())
    watch.start()
    server.put({"type": "http.request", "n": 1})
    server.put({"type": "http.request", "n": 2})
    await anyio.sleep(0.01)
    assert len(asyncio.all_tasks()) == tasks, "the watch is no task"
    server.put({"type": "http.disconnect"})
    with anyio.fail_after(5):
        await done.wait()
    assert seen == [
        {"type": "http.request", "n": 1},
        {"type": "http.request", "n": 2},
        {"type": "http.disconnect"},
    ]
    watch.close()
    assert server.cleaned == 3


async def test_close_ends_a_pending_receive_and_runs_its_finally() -> None:
    server = _Server()
    seen: list[Any] = []
    watch = ReceiveWatch(server.receive, lambda m: seen.append(m) or True)  # type: ignore[arg-type]
    watch.start()
    await anyio.sleep(0.01)
    watch.close()
    watch.close()  # idempotent
    assert server.cleaned == 1 and seen == []
    server.put({"type": "http.request"})
    await anyio.sleep(0.01)
    assert seen == [], "a closed watch takes no message"


async def test_a_receive_that_raises_is_a_lost_connection() -> None:
    async def receive() -> dict[str, Any]:
        await asyncio.sleep(0)
        raise RuntimeError("transport gone")

    seen: list[Any] = []
    done = anyio.Event()

    def on_message(message: Any) -> bool:
        seen.append(message)
        done.set()
        return True

    ReceiveWatch(receive, on_message).start()  # type: ignore[arg-type]
    with anyio.fail_after(5):
        await done.wait()
    assert seen == [None]


async def test_a_receive_returning_a_plain_future_is_stepped_too() -> None:
    # granian's receive() returns its own future-like object, not a coroutine: no ``send``.
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[dict[str, Any]]] = []

    def receive() -> asyncio.Future[dict[str, Any]]:
        futures.append(loop.create_future())
        return futures[-1]

    seen: list[Any] = []
    done = anyio.Event()

    def on_message(message: Any) -> bool:
        seen.append(message)
        if message is None or message["type"] == "http.disconnect":
            done.set()
            return False
        return True

    assert not hasattr(receive(), "send")
    futures.clear()
    ReceiveWatch(receive, on_message).start()  # type: ignore[arg-type]
    futures[0].set_result({"type": "http.request"})
    await anyio.sleep(0.01)
    futures[1].set_result({"type": "http.disconnect"})
    with anyio.fail_after(5):
        await done.wait()
    assert seen == [{"type": "http.request"}, {"type": "http.disconnect"}]
    assert len(futures) == 2


async def test_a_streaming_response_runs_no_task_besides_the_callers() -> None:
    server = _Server()
    sent: list[dict[str, Any]] = []
    first_body = anyio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            first_body.set()

    buffer = FrameBuffer()
    closed: list[bool] = []
    response = SseResponse(buffer, on_close=lambda: closed.append(True), ping_after=None)
    scope = {"type": "http", "method": "GET", "path": "/x", "headers": []}
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tasks = len(asyncio.all_tasks())
            tg.start_soon(response, scope, server.receive, send)
            buffer.push(b"data: 1\n\n")
            await first_body.wait()
            assert len(asyncio.all_tasks()) == tasks + 1, "only the response's own task"
            server.put({"type": "http.disconnect"})
    assert [m.get("body") for m in sent[1:]] == [b"data: 1\n\n"]
    assert closed == [True] and buffer.disconnected
