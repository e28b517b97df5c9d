"""Gateway streams belong to the caller: not persisted, aborted on disconnect, and (scenario 40)
a stall or an abort ends in a dialect error frame, or HTTP 504 when nothing was committed."""

from __future__ import annotations

from pathlib import Path

import anthropic
import anyio
import httpx
import openai
import pytest

from drupe.streaming.manager import StatusRecord
from drupe.testing.recording import RecordingListener
from tests.gateway.compat.conftest import Gateway, open_gateway


class GatewayWatch:
    """Status changes of ``gateway:*`` conversations, and the first one's id."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.started = anyio.Event()
        self.conversation_id = ""

    def __call__(self, conversation_id: str, record: StatusRecord) -> None:
        if not conversation_id.startswith("gateway:"):
            return
        self.seen.append((conversation_id, record.status))
        if not self.conversation_id:
            self.conversation_id = conversation_id
            self.started.set()


async def test_client_disconnect_aborts_the_stream(gateway: Gateway) -> None:
    manager = gateway.runtime.manager
    watch = GatewayWatch()
    remove = manager.add_status_observer(watch)
    recorder = RecordingListener("test-observer")
    body = {
        "model": "scripted:lorem?words=400&rate=40",
        "messages": [{"role": "user", "content": "long answer"}],
        "stream": True,
    }
    headers = {"authorization": f"Bearer {gateway.key}"}
    with anyio.fail_after(10):
        async with (
            httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=10) as http,
            http.stream("POST", "/v1/chat/completions", json=body) as response,
        ):
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    break  # committed and streaming: now walk away
            await watch.started.wait()
            manager.attach(watch.conversation_id, recorder)
        terminal = await recorder.wait_done()
    remove()
    assert terminal.status == "paused"
    assert terminal.reason == "client-disconnect"
    assert (watch.conversation_id, "aborted") in watch.seen
    assert len(recorder.message()["parts"]) > 0  # it was mid-answer, not finished


async def test_gateway_streams_are_not_persisted_and_leave_no_status(gateway: Gateway) -> None:
    manager = gateway.runtime.manager
    watch = GatewayWatch()
    remove = manager.add_status_observer(watch)
    async with gateway.openai() as client:
        reply = await client.chat.completions.create(
            model="scripted:echo", messages=[{"role": "user", "content": "ping"}]
        )
    remove()
    assert reply.choices[0].message.content == "You said: ping"
    assert watch.seen[-1] == (watch.conversation_id, "done")
    assert manager.status(watch.conversation_id) is None
    assert manager.get(watch.conversation_id) is None
    assert await gateway.runtime.db.conversations.list() == []  # type: ignore[call-arg]


async def test_scenario_40_openai_stall_after_commit_is_an_error_frame(
    stalling_gateway: Gateway,
) -> None:
    received: list[str] = []
    finishes: list[str] = []
    async with stalling_gateway.openai() as client:
        stream = await client.chat.completions.create(
            model="scripted:gw-stall-mid",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        with anyio.fail_after(10), pytest.raises(openai.APIError) as caught:
            async for chunk in stream:
                if chunk.choices:
                    received.append(chunk.choices[0].delta.content or "")
                    if chunk.choices[0].finish_reason:
                        finishes.append(chunk.choices[0].finish_reason)
    assert "".join(received) == "partial answer "
    assert finishes == []  # never a success
    assert caught.value.body == {
        "message": "the model produced no output for 1 s; the stream was stopped",
        "type": "timeout",
        "param": None,
        "code": "gateway_timeout",
    }


async def test_scenario_40_openai_stall_before_commit_is_504(stalling_gateway: Gateway) -> None:
    manager = stalling_gateway.runtime.manager
    paused_before = manager.statistics()["outcomes"]["paused"]
    async with stalling_gateway.openai() as client:
        for stream in (True, False):
            with anyio.fail_after(10), pytest.raises(openai.APIStatusError) as caught:
                await client.chat.completions.create(
                    model="scripted:gw-stall-start",
                    messages=[{"role": "user", "content": "hi"}],
                    stream=stream,
                )
            assert caught.value.status_code == 504
            assert caught.value.body["code"] == "gateway_timeout"  # type: ignore[index]
    # Both model streams were really stopped (and settled) before the 504s were sent.
    assert manager.statistics()["outcomes"]["paused"] == paused_before + 2
    assert manager.statistics()["live_streams"] == 0


async def test_scenario_40_anthropic_stall(stalling_gateway: Gateway) -> None:
    async with stalling_gateway.anthropic() as client:
        texts: list[str] = []
        with anyio.fail_after(10), pytest.raises(anthropic.APIStatusError) as committed:
            async with client.messages.stream(
                model="scripted:gw-stall-mid",
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
            ) as stream:
                async for text in stream.text_stream:
                    texts.append(text)
        with anyio.fail_after(10), pytest.raises(anthropic.APIStatusError) as uncommitted:
            await client.messages.create(
                model="scripted:gw-stall-start",
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
            )
    assert "".join(texts) == "partial answer "
    assert committed.value.body["error"]["type"] == "timeout_error"  # type: ignore[index]
    assert uncommitted.value.status_code == 504
    assert uncommitted.value.body["error"]["type"] == "timeout_error"  # type: ignore[index]


async def test_an_abort_is_never_a_success(gateway: Gateway) -> None:
    manager = gateway.runtime.manager
    watch = GatewayWatch()
    remove = manager.add_status_observer(watch)
    body = {
        "model": "scripted:lorem?words=400&rate=40",
        "max_tokens": 500,
        "stream": True,
        "messages": [{"role": "user", "content": "long answer"}],
    }
    headers = {"x-api-key": gateway.key}
    with anyio.fail_after(10):
        async with (
            httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=10) as http,
            http.stream("POST", "/v1/messages", json=body) as response,
        ):
            lines = response.aiter_lines()
            async for line in lines:
                if line == "event: content_block_delta":
                    break
            await watch.started.wait()
            assert manager.abort(watch.conversation_id, "user-stop")
            rest = [line async for line in lines]
    remove()
    events = [line for line in rest if line.startswith("event: ")]
    assert "event: message_stop" not in events
    assert events[-1] == "event: error"
    assert '"the model stream was stopped (user-stop)"' in rest[-2]


async def test_keys_can_be_switched_off(tmp_path: Path) -> None:
    async with open_gateway(tmp_path, require_gateway_keys=False) as gw:
        async with httpx.AsyncClient(base_url=gw.url) as http:
            response = await http.get("/v1/models")
        assert response.status_code == 200
        assert response.json()["object"] == "list"
