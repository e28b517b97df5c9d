"""The chat-completions pass-through: the gateway's fast path to OpenAI-wire providers.

A ``POST /v1/chat/completions`` for a model of an ``openai`` or ``openai-compatible`` provider
needs none of the agent loop: the client already speaks the upstream's wire format. Such a
request (validated, authenticated, scoped and budgeted exactly like any other) is forwarded to
``<base_url>/chat/completions`` over one pooled ``aiohttp`` session per upstream, and the
upstream's answer is relayed frame by frame. What Drupe changes on the way:

* upstream body: ``model`` becomes the provider's model name; ``stream_options.include_usage``
  is always asked for when streaming (the key's token budget is charged from it); for
  ``openai-compatible`` servers ``max_completion_tokens`` is sent as ``max_tokens`` and a
  ``developer`` message as ``system`` (what llama.cpp, Ollama and vLLM understand). Every
  other field goes through as the client sent it;
* reply: ``model`` is the client's ``provider:model`` id again; the usage-only chunk (and the
  ``usage`` key) is dropped unless the client asked for it; ``data: [DONE]`` ends a stream.

The response rules are ``PromptResponse``'s (reference §9): a streaming response is committed
on the first meaningful frame (content, reasoning, tool calls or a finish reason); before that a
failure is the OpenAI error JSON with a 4xx/5xx status (upstream 429 -> 429, 400/413/422 ->
400, anything else -> 502; ``settings.gateway_idle_timeout`` without a byte -> 504), after it an
error frame. Retryable upstream failures (408, 409, 429, 5xx, transport errors) are tried again
before anything was committed, following the agent loop's ``RetryPolicy``. A client
disconnect closes the upstream request at once. ``on_end(TokenUsage)`` is called once with the
input and output tokens the upstream reported, whatever the outcome.

Never: log a request body or a key, or keep an upstream request open after its response ended.
The wire rules (body rewrites, usage split, failure mapping) are in ``passthrough_wire``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio
import orjson
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from drupe.agent.models.providers import KEYLESS_API_KEY
from drupe.agent.models.registry import split_model_id
from drupe.agent.retry_policy import RETRYABLE_STATUS, RetryPolicy, parse_retry_after
from drupe.errors import ConfigError
from drupe.gateway.openai_compat import DONE, OpenAIChat, openai_error_body
from drupe.gateway.passthrough_wire import (
    Upstream,
    env_proxy,
    meaningful,
    tokens_of,
    upstream_body,
    upstream_failure,
)
from drupe.gateway.prompt import GatewayFailure
from drupe.gateway.prompt_response import SSE_HEADERS
from drupe.persistence.gateway_usage_meter import TokenUsage

if TYPE_CHECKING:
    import aiohttp

    from drupe.app import Runtime

__all__ = ["PASS_THROUGH_FLAVORS", "Passthrough", "PassthroughResponse", "Upstream"]

log = logging.getLogger(__name__)

PASS_THROUGH_FLAVORS: Final = frozenset(("openai", "compatible"))
"""Provider flavors whose wire format is OpenAI chat completions (served by the fast path)."""
_OPENAI_URL: Final = "https://api.openai.com/v1"
_JSON_HEADERS: Final = [(b"content-type", b"application/json")]
_SSE_RAW: Final = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in SSE_HEADERS.items()]


class Passthrough:
    """The pooled upstream clients and the fast-path decision of one gateway router."""

    def __init__(self, runtime: Runtime, *, retry: RetryPolicy | None = None) -> None:
        self.runtime = runtime
        self.retry = retry or RetryPolicy()
        self._upstreams: dict[str, Upstream | None] = {}
        self._clients: dict[tuple[str, str], aiohttp.ClientSession] = {}

    def upstream(self, model_id: str) -> Upstream | None:
        """The upstream of ``model_id`` when it takes the fast path (None: the agent loop)."""
        if not self.runtime.settings.gateway_passthrough:
            return None
        if model_id in self._upstreams:
            return self._upstreams[model_id]
        found: Upstream | None = None
        try:
            provider_name, model_name = split_model_id(model_id)
        except ConfigError:
            provider_name, model_name = "", ""
        provider = self.runtime.models.config.providers.get(provider_name)
        if provider is not None and provider.flavor in PASS_THROUGH_FLAVORS and provider.has_key:
            base_url = (provider.base_url or _OPENAI_URL).rstrip("/")
            found = Upstream(
                base_url=base_url,
                model_name=model_name,
                api_key=provider.api_key or KEYLESS_API_KEY,
                compatible=provider.flavor == "compatible",
                proxy=env_proxy(base_url),
            )
        self._upstreams[model_id] = found
        return found

    def client(self, upstream: Upstream) -> aiohttp.ClientSession:
        """The pooled session of ``upstream``'s URL and key (one each, made on first use).

        aiohttp, not httpx: its C HTTP parser costs ~0.15 ms of CPU per proxied request here
        where httpx costs ~1.4 ms (``bench/README.md``). Imported on first use (boot time).
        """
        pool = (upstream.base_url, upstream.api_key)
        client = self._clients.get(pool)
        if client is None:
            import aiohttp

            idle = self.runtime.settings.gateway_idle_timeout
            client = aiohttp.ClientSession(
                base_url=upstream.base_url + "/",
                headers={"authorization": f"Bearer {upstream.api_key}"},
                timeout=aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=idle),
                connector=aiohttp.TCPConnector(limit=256, limit_per_host=0),
            )
            self._clients[pool] = client
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    def respond(
        self,
        upstream: Upstream,
        body: Mapping[str, Any],
        chat: OpenAIChat,
        *,
        on_end: Callable[[TokenUsage], None] | None = None,
    ) -> PassthroughResponse:
        return PassthroughResponse(
            self.client(upstream),
            upstream_body(body, upstream, stream=chat.stream),
            chat,
            proxy=upstream.proxy,
            retry=self.retry,
            idle_timeout=self.runtime.settings.gateway_idle_timeout,
            on_end=on_end,
            closing=self.runtime.manager.closing,
        )


class _Retry(Exception):
    """An upstream attempt failed in a way the retry policy may try again."""

    def __init__(self, failure: GatewayFailure, retry_after: float | None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.retry_after = retry_after


class _Failed(Exception):
    """The upstream failed in a way that is final (an error frame before any content)."""

    def __init__(self, failure: GatewayFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class PassthroughResponse(Response):
    """The ASGI response of one forwarded chat completion (see the module docstring).

    A ``Response`` subclass only so that FastAPI hands it to the server as-is.
    """

    def __init__(
        self,
        client: aiohttp.ClientSession,
        body: bytes,
        chat: OpenAIChat,
        *,
        retry: RetryPolicy,
        idle_timeout: float,
        proxy: str | None = None,
        on_end: Callable[[TokenUsage], None] | None = None,
        closing: bool = False,
    ) -> None:
        super().__init__()
        self.client = client
        self.upstream_body = body
        self.model = chat.model
        self.streaming = chat.stream
        self.include_usage = chat.include_usage
        self.retry = retry
        self.proxy = proxy
        self.idle_timeout = idle_timeout
        self.on_end = on_end
        self.shutting_down = closing
        self.committed = False
        self.tokens = TokenUsage()
        self._done = False
        self._send: Send | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send = send
        try:
            if self.shutting_down:
                failure = GatewayFailure(503, "unavailable", "the server is shutting down")
                await self._json(503, openai_error_body(failure))
                return
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_disconnect, receive, tg.cancel_scope)
                await self._forward(tg.cancel_scope)
        finally:
            if self.on_end is not None:
                self.on_end(self.tokens)

    async def _watch_disconnect(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                scope.cancel()  # closes the upstream request with it
                return

    async def _forward(self, scope: anyio.CancelScope) -> None:
        with contextlib.suppress(OSError):  # the client is gone
            await self._attempts()
        scope.cancel()

    async def _attempts(self) -> None:
        import aiohttp

        attempt = 1
        while True:
            try:
                await self._once()
                return
            except _Failed as failed:
                await self._fail(failed.failure)
                return
            except _Retry as failed:
                delay = self._delay(attempt, failed)
                if delay is None:
                    await self._fail(failed.failure)
                    return
                log.info("gateway upstream attempt %d failed (%s); retrying", attempt, failed)
                await anyio.sleep(delay)
                attempt += 1
            except TimeoutError:
                idle = f"{self.idle_timeout:g}"
                message = f"the model produced no output for {idle} s; the stream was stopped"
                await self._fail(GatewayFailure(504, "timeout", message))
                return
            except aiohttp.ClientError as err:
                # The upstream connection broke while the answer was read.
                await self._fail(GatewayFailure(502, "upstream", f"upstream failed: {err!r}"))
                return

    def _delay(self, attempt: int, failed: _Retry) -> float | None:
        policy = self.retry
        if attempt >= policy.attempts:
            return None
        if failed.retry_after is not None:
            return None if failed.retry_after > policy.max_retry_after else failed.retry_after
        return policy.backoff(attempt)

    async def _once(self) -> None:
        import aiohttp

        try:
            response = await self.client.post(
                "chat/completions",
                data=self.upstream_body,
                headers=self._request_headers(),
                proxy=self.proxy,
            )
        except aiohttp.ClientConnectionError as err:
            if isinstance(err, aiohttp.SocketTimeoutError):
                raise  # no answer within the idle timeout: a 504, not a retry
            failure = GatewayFailure(502, "upstream", f"upstream unreachable: {err!r}")
            raise _Retry(failure, None) from err
        async with response:
            if response.status != 200:
                raw = await response.read()
                failure = upstream_failure(response.status, raw)
                status = response.status
                if status in RETRYABLE_STATUS or 500 <= status <= 599:
                    raise _Retry(failure, parse_retry_after(response.headers))
                await self._fail(failure)
                return
            if self.streaming:
                await self._relay(response)
            else:
                await self._complete(await response.read())

    def _request_headers(self) -> dict[str, str]:
        accept = "text/event-stream" if self.streaming else "application/json"
        return {"content-type": "application/json", "accept": accept}

    async def _complete(self, raw: bytes) -> None:
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError:
            payload = None
        if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
            await self._fail(GatewayFailure(502, "upstream", "the upstream answer is not JSON"))
            return
        payload["model"] = self.model
        self.tokens = tokens_of(payload.get("usage"))
        await self._json(200, payload)

    async def _relay(self, response: aiohttp.ClientResponse) -> None:
        pending: list[bytes] = []
        buffer = b""
        self._done = False
        received = response.content.iter_any()
        async for data in received:
            buffer += data.replace(b"\r\n", b"\n") if b"\r" in data else data
            *events, buffer = buffer.split(b"\n\n")
            commit = False
            for event in events:
                frame = self._frame(event)
                if frame is not None:
                    pending.append(frame[0])
                    commit = commit or frame[1]
                if self._done:
                    break
            if commit and not self.committed:
                await self._start(200, _SSE_RAW)
            if self._done:
                break
            if self.committed and pending:
                await self._body(b"".join(pending), more=True)
                pending.clear()
        if not self.committed:
            await self._start(200, _SSE_RAW)
        pending.append(DONE)
        await self._body(b"".join(pending), more=False)
        async for _ in received:
            pass  # read to the end: the connection goes back to the pool

    def _frame(self, event: bytes) -> tuple[bytes, bool] | None:
        """One upstream SSE event -> (the frame to relay, whether it commits), or None."""
        data = b""
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                data += line[5:].lstrip(b" ")
        if not data:
            return None  # comments, keep-alives, empty events
        if data == b"[DONE]":
            self._done = True
            return None
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(payload, dict):
            return None
        if "error" in payload and "choices" not in payload and not self.committed:
            raise _Failed(upstream_failure(502, data))
        usage = payload.get("usage")
        if usage is not None:
            used = tokens_of(usage)
            if used.total > self.tokens.total:
                self.tokens = used
        if "model" in payload:
            payload["model"] = self.model
        if not self.include_usage:
            payload.pop("usage", None)
            if payload.get("choices") == []:
                return None  # the usage chunk Drupe asked for on its own account
        return b"data: " + orjson.dumps(payload) + b"\n\n", meaningful(payload)

    async def _fail(self, failure: GatewayFailure) -> None:
        if self.committed:
            frame = b"data: " + orjson.dumps(openai_error_body(failure)) + b"\n\n"
            await self._body(frame, more=False)
            return
        log.info("gateway pass-through failed before commit: %d %s", failure.status, failure.kind)
        await self._json(failure.status, openai_error_body(failure))

    async def _json(self, status: int, body: Mapping[str, Any]) -> None:
        data = orjson.dumps(body)
        await self._start(status, [*_JSON_HEADERS, (b"content-length", str(len(data)).encode())])
        await self._body(data, more=False)

    async def _start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        assert self._send is not None
        self.committed = True
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def _body(self, data: bytes, *, more: bool) -> None:
        assert self._send is not None
        await self._send({"type": "http.response.body", "body": data, "more_body": more})
