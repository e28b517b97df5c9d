"""A single-connection IM channel (Telegram long polling) in cluster mode: exactly one node
receives it, and another node takes over when that one stops.

Two real runtimes on one PostgreSQL database and one Redis prefix, each with the same Telegram
channel configured (python-telegram-bot against the loopback fake Bot API). Without the receiver
lease both would poll ``getUpdates`` and every message would be answered twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from drupe.agent.models.script import Text, ToolCall
from drupe.agent.models.scripted import register_script
from drupe.app import channel_service
from drupe.channels.receiver import serve_single_receiver
from drupe.channels.service import ChannelService
from drupe.cluster.lease import RedisLease
from drupe.cluster.receiver import RedisReceiverLease
from drupe.testing.fake_telegram import FakeTelegram, fake_telegram
from drupe.tools.base import ToolContext, ToolEntry
from tests.channels.conftest import ALICE, CHAT_A, telegram_config
from tests.cluster.nodes import Node, cluster_nodes

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
async def nodes(tmp_path: Path, prefix: str) -> AsyncIterator[list[Node]]:
    async with cluster_nodes(tmp_path, prefix, lease_ttl=3.0) as pair:
        yield pair


async def roles_settled(services: list[ChannelService]) -> None:
    for _ in range(200):
        roles = sorted(str(s.channels["tg"].role) for s in services)
        if roles == ["receiver", "standby"][: len(services)] or roles == ["receiver"]:
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"roles never settled: {roles}")


async def answered(tg: FakeTelegram, text: str, services: list[ChannelService]) -> None:
    await tg.recorder.wait_until(lambda: any(text in t for t in tg.messages(CHAT_A)))
    for service in services:
        outbox = service.channels["tg"].outboxes.get(str(CHAT_A))
        if outbox is not None:
            with anyio.fail_after(10):
                await outbox.wait_idle()


async def test_one_node_receives_and_another_takes_over_when_it_stops(
    nodes: list[Node],
) -> None:
    async with fake_telegram() as tg, anyio.create_task_group() as tasks:
        config = telegram_config(tg.base_url)
        services: list[ChannelService] = []
        stops: list[anyio.Event] = []

        async def run_channels(node: Node, started: anyio.Event, stop: anyio.Event) -> None:
            # Each node's service in its own task, so either can stop first.
            async with channel_service(node.runtime, [config]) as service:
                services.append(service)
                started.set()
                await stop.wait()

        for node in nodes:
            started, stop = anyio.Event(), anyio.Event()
            stops.append(stop)
            tasks.start_soon(run_channels, node, started, stop)
            with anyio.fail_after(20):
                await started.wait()
        await roles_settled(services)
        assert all(s.channels["tg"].state == "connected" for s in services)
        receiver = next(s for s in services if s.channels["tg"].role == "receiver")
        tg.push_message(CHAT_A, ALICE, "first message")
        await answered(tg, "first message", services)
        await anyio.sleep(0.5)  # a second poller, if any, would have answered by now
        assert len(tg.messages(CHAT_A)) == 1
        assert len(tg.recorder.of("setMyCommands")) == 1  # only the receiver set them up
        # The receiver's node stops: the other one receives from now on.
        index = services.index(receiver)
        survivor = services[1 - index]
        stops[index].set()
        with anyio.fail_after(10):
            await roles_settled([survivor])
        tg.push_message(CHAT_A, ALICE, "second message")
        await answered(tg, "second message", [survivor])
        await anyio.sleep(0.5)
        assert len(tg.messages(CHAT_A)) == 2
        assert len([t for t in tg.messages(CHAT_A) if "second message" in t]) == 1
        stops[1 - index].set()


async def test_a_receiver_that_loses_its_lease_stops_receiving_at_once(
    redis: Redis, prefix: str
) -> None:
    lease = RedisLease(redis, prefix=prefix, ttl=0.6)
    mine = RedisReceiverLease(lease, "n1")
    phases: list[bool] = []
    receiving = anyio.Event()
    stopped_receiving, standby_again = anyio.Event(), anyio.Event()

    async def run(receive: bool) -> None:
        phases.append(receive)
        if not receive:
            if receiving.is_set():
                standby_again.set()
            await anyio.sleep_forever()
        receiving.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped_receiving.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_single_receiver, mine, "channel:tg", run)
        with anyio.fail_after(5):
            await receiving.wait()
        assert phases == [False, True]  # standby first, then the lease was free
        # Another node takes the lease (this one stalled past the TTL): receiving stops.
        await redis.delete(lease.lease_key("receiver:channel:tg"))
        theirs = await RedisReceiverLease(lease, "n2").acquire("channel:tg")
        assert theirs is not None
        with anyio.fail_after(5):
            await stopped_receiving.wait()
        with anyio.fail_after(5):
            await standby_again.wait()
        assert phases == [False, True, False]  # back to standby while n2 holds it
        # n2 never renews (it died): once its lease expires, n1 receives again.
        receiving = anyio.Event()
        with anyio.fail_after(5):
            await receiving.wait()
        assert phases == [False, True, False, True]
        tg.cancel_scope.cancel()


async def _remove(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return f"removed {arguments.get('path')}"


async def test_a_chat_whose_conversation_another_node_owns_is_answered_and_approved_there(
    nodes: list[Node],
) -> None:
    register_script(
        "cluster-tg-approve",
        [[ToolCall("rm", {"path": "/tmp/x"}, tool_call_id="call-1")], [Text("All clean.")]],
    )
    for node in nodes:
        node.runtime.tools.register(
            ToolEntry(
                name="rm",
                description="Remove a file",
                input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
                execute=_remove,
                needs_approval=lambda args: True,
            )
        )
    a, b = nodes
    db = a.runtime.db
    conversation = await db.conversations.create(title="tg chat")
    model = "model:scripted:cluster-tg-approve"
    await db.channels.bind("tg", str(CHAT_A), conversation_id=conversation.id, target=model)
    async with fake_telegram() as tg:
        config = telegram_config(tg.base_url, target=model)
        # Only B runs the channel, so B receives the chat; A owns its conversation meanwhile.
        cluster_a = a.takeover
        async with (
            cluster_a.ownership.hold(conversation.id),
            channel_service(b.runtime, [config]) as service,
        ):
            tg.push_message(CHAT_A, ALICE, "clean up")
            await tg.recorder.wait_until(lambda: any("reply_markup" in s for s in tg.sends(CHAT_A)))
            prompt = next(s for s in tg.sends(CHAT_A) if "reply_markup" in s)
            approve = prompt["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
            tg.push_callback(CHAT_A, ALICE, approve)
            await tg.recorder.wait_until(lambda: "All clean." in tg.messages(CHAT_A))
            await answered(tg, "All clean.", [service])
            with anyio.fail_after(10):
                await a.runtime.manager.wait_settled(conversation.id)
    rows = await db.messages.list_for_conversation(conversation.id)
    answer = [r for r in rows if r.role == "assistant"][-1]
    assert answer.status == "success"
    assert answer.fence == cluster_a.ownership.fence_for(conversation.id)  # A wrote it
    assert b.runtime.manager.status(conversation.id) is None  # B only relayed the turns
    tool = next(p for p in answer.parts if p["type"] == "tool-rm")
    assert tool["state"] == "output-available" and tool["output"] == "removed /tmp/x"
    assert tg.messages(CHAT_A)[0].endswith("\n\n✅ Approved by user1001")  # buttons settled
    assert tg.keyboard(CHAT_A, tg.message_ids(CHAT_A)[0]) is None
    assert tg.answers() == ["Approved."]
