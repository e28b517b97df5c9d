"""Invariant 4 over HTTP (a real uvicorn server): concurrent submits to one conversation are
admitted one at a time. One starts the turn, the others are queued as steers and answered after
it: every response is a 200 UI stream that ends with ``[DONE]`` and no ``error`` chunk, and no
row is left ``pending``. Without the per-conversation admission lock, a submit is refused
(``409 busy``) after its rows were written, leaving an orphan ``pending`` placeholder."""

from __future__ import annotations

from typing import Any

import anyio
import httpx

from drupe.app import Runtime
from tests.gateway.sse import chat_body, chunks, parse_events

PACED = "scripted:lorem?words=40&rate=100"


async def test_concurrent_http_submits_start_one_turn_and_answer_the_others_after_it(
    server: Any, runtime: Runtime
) -> None:
    await runtime.db.conversations.ensure("c-conc")
    manager = runtime.manager
    responses: list[httpx.Response] = []
    quiet = anyio.Event()  # the last queued message was answered: done with an empty queue

    def observe(conversation_id: str, record: Any) -> None:
        done = conversation_id == "c-conc" and record.status == "done"
        if done and not manager.steers.pending("c-conc"):
            quiet.set()

    remove = manager.add_status_observer(observe)

    async def post(client: httpx.AsyncClient, index: int) -> None:
        body = chat_body("c-conc", f"message {index}", message_id=f"m{index}", models=[PACED])
        responses.append(await client.post("/api/chat", json=body))

    async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for index in range(3):
                    tg.start_soon(post, client, index)
    assert [r.status_code for r in responses] == [200, 200, 200], [r.text for r in responses]
    for response in responses:
        events = parse_events(response.text)
        assert events[-1].data == "[DONE]"
        assert [c for c in chunks(events) if c["type"] == "error"] == []
    with anyio.fail_after(30):
        await quiet.wait()
    remove()
    await manager.wait_settled("c-conc")
    rows = await runtime.db.messages.list_for_conversation("c-conc")
    assert [(r.role, r.status) for r in rows if r.status != "success"] == []
    users = [r for r in rows if r.role == "user"]
    answers = [r for r in rows if r.role == "assistant"]
    assert len(users) == 3 and len(answers) == 3
    assert sorted(a.parent_id or "" for a in answers) == sorted(u.id for u in users)
