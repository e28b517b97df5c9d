"""The AG-UI routes' handlers (``routes`` imports this module on the first AG-UI call, so
that a boot does not import the ``ag_ui`` package). ``routes`` states the contract.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import pydantic
from ag_ui.core import BaseEvent, RunAgentInput
from ag_ui.encoder import EventEncoder
from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from drupe.admission.base import Submit
from drupe.admission.conversations import Subscription
from drupe.admission.principal import Principal
from drupe.errors import DrupeError
from drupe.gateway.access import GatewayAccess
from drupe.gateway.dialect_routes import read_json
from drupe.gateway.limits import AGENT_PREFIX, check_agent_scope, check_scope
from drupe.gateway.prompt import GatewayError
from drupe.http.errors import status_for
from drupe.http.state import get_caller
from drupe.ids import SESSION_PREFIX
from drupe.persistence.records import ApiKeyRecord
from drupe.protocols.agui.request import (
    Approvals,
    BadRunInput,
    RunPlan,
    ToolResults,
    client_tools,
    plan_run,
)
from drupe.protocols.agui.threads import (
    bad_input,
    conversation_of,
    existing_conversation,
    refuse,
    run_error_body,
)
from drupe.protocols.agui.translate import AguiRun
from drupe.protocols.follower import AnswerFollower
from drupe.streaming.approval_rules import Decision
from drupe.streaming.listeners.base import TerminalResult

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["connect", "run_agent"]

_IDLE_PING = 15.0
"""Seconds without an event before an SSE comment keeps the connection open."""


_KINDS = {
    404: "not_found",
    409: "conflict",
    413: "too_large",
    429: "rate_limit",
    503: "unavailable",
}


async def _events(
    run: AguiRun, listener: AnswerFollower, hold: Subscription | None, first: list[BaseEvent]
) -> AsyncIterator[str]:
    """The run's SSE body; ``hold`` (None: nothing to follow) is let go of at the end."""
    encoder = EventEncoder()
    try:
        for event in [*run.started(), *first]:
            yield encoder.encode(event)
        if hold is None:
            return
        while True:
            items = await listener.take(_IDLE_PING)
            if items is None:
                yield ": ping\n\n"
                continue
            if listener.overflowed:
                for event in run.failed("the client read too slowly", "slow_client"):
                    yield encoder.encode(event)
                return
            for item in items:
                if isinstance(item, TerminalResult):
                    reason = item.reason
                    error = (item.error or {}).get("message") if item.error else None
                    for event in run.finished(item.status, reason=reason, error=error):
                        yield encoder.encode(event)
                    return
                for event in run.feed(item.chunk):
                    yield encoder.encode(event)
    finally:
        listener.closed = True
        if hold is not None:
            hold.close()  # detach only: the answer goes on


async def _client_results(
    runtime: Runtime, caller: Principal, conversation_id: str, results: list[tuple[str, str]]
) -> list[Decision]:
    """The approvals that let the pending client-side tool calls take the client's results."""
    pending: dict[str, str] = {}
    # An unknown conversation, or one the caller may not see: 404.
    for row in await runtime.conversations.messages(caller, conversation_id):
        for part in row.parts if row.role == "assistant" else ():
            approval = part.get("approval")
            if part.get("state") == "approval-requested" and isinstance(approval, dict):
                pending[str(part.get("toolCallId"))] = str(approval.get("id"))
    missing = [call for call, _ in results if call not in pending]
    if missing:
        raise refuse(409, "conflict", f"no pending client-side tool call {missing} in this thread")
    return [Decision(approval_id=pending[call], approved=True) for call, _ in results]


async def _admit(
    runtime: Runtime,
    caller: Principal,
    plan: RunPlan,
    conversation_id: str,
    models: list[str],
    listener: AnswerFollower,
    run: AguiRun,
    decisions: list[Decision],
) -> tuple[Subscription | None, list[BaseEvent]]:
    """Submit the run's message, or answer its approvals / client tool calls; returns what the
    listener's hold is (None: nothing to follow) and the events to send before following."""
    conversations = runtime.conversations
    first: list[BaseEvent] = []
    hold: Subscription | None = None
    if isinstance(plan, Approvals | ToolResults):
        listener.follow_any()  # only this run's continuation carries it
        outcome = await conversations.approve(
            caller, conversation_id, decisions, subscribers=[listener]
        )
        if not outcome.ok:
            raise refuse(409, "conflict", outcome.reason or "the approvals were refused")
        if outcome.continued:
            # The continuation carries the listener; closing it lets the manager drop
            # it at its next fan-out.
            hold = Subscription()
        else:  # other approvals still wait: the run ends interrupted by them
            for row in await conversations.messages(caller, conversation_id):
                for part in row.parts if row.role == "assistant" else ():
                    approval = part.get("approval")
                    if part.get("state") == "approval-requested" and approval:
                        run.awaits_approval(str(approval["id"]), str(part["toolCallId"]))
            first = run.finished("success")
    else:
        submit = Submit(
            conversation_id=conversation_id,
            parts=plan.parts,
            model_ids=models,
            strategy=plan.strategy,
        )
        admitted = await conversations.submit(caller, submit, listener=listener)
        hold = admitted.subscription
        steer = admitted.result.steer
        if steer in ("drop", "queue-and-hold"):
            admitted.close()
            hold = None
            first = run.failed(
                "the message was stored but not answered: "
                + (
                    "the running answer ended first"
                    if steer == "drop"
                    else "it is answered once the pending tool approvals are decided"
                ),
                f"steer_{steer.replace('-', '_')}",
            )
    return hold, first


async def _run_input(runtime: Runtime, request: Request) -> RunAgentInput:
    body = await read_json(request, runtime, run_error_body)
    try:
        return RunAgentInput.model_validate(body)
    except pydantic.ValidationError as err:
        detail = err.errors()[0]
        where = ".".join(str(p) for p in detail["loc"]) or "body"
        raise refuse(
            400, "invalid_request", f"not a RunAgentInput: {where}: {detail['msg']}"
        ) from None


def _events_response(events: Any) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type=EventEncoder().get_content_type(),
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


async def connect(runtime: Runtime, target: str, request: Request) -> Response:
    run_input = await _run_input(runtime, request)
    conversation_id = await existing_conversation(runtime, target, run_input.thread_id)
    listener = AnswerFollower(f"ag-ui-connect:{uuid.uuid4().hex}")
    try:
        subscription = await runtime.conversations.resume(
            get_caller(request), conversation_id, cast(Any, listener), None
        )
    except DrupeError as err:
        status = status_for(err)
        raise refuse(status, _KINDS.get(status, "invalid_request"), str(err)) from None
    if subscription is None:
        return Response(status_code=204)
    run = AguiRun(thread_id=run_input.thread_id, run_id=run_input.run_id)
    return _events_response(_events(run, listener, subscription, []))


async def _check_access(
    access: GatewayAccess, key: ApiKeyRecord | None, target: str, has_tools: bool
) -> None:
    """The key's scopes and budget for ``target`` (client tools only for model targets)."""
    if has_tools and target.startswith((AGENT_PREFIX, SESSION_PREFIX)):
        raise refuse(
            422,
            "invalid_request",
            "client-side tools are offered to model targets (an agent has its own tools)",
        )
    if target.startswith(AGENT_PREFIX):
        refusal = check_agent_scope(key, target[len(AGENT_PREFIX) :])
    elif target.startswith(SESSION_PREFIX):
        refusal = None  # the session's agent is checked by the key's agent scope below
        agent_id = await access.agent_of(target)
        if agent_id:
            refusal = check_agent_scope(key, agent_id)
    else:
        refusal = check_scope(key, target)
    if refusal is not None:
        raise refuse(403, "forbidden", refusal)
    await access.check_budget(key, run_error_body)


async def run_agent(
    runtime: Runtime,
    access: GatewayAccess,
    target: str,
    request: Request,
    key: ApiKeyRecord | None,
) -> Response:
    run_input = await _run_input(runtime, request)
    try:
        plan = plan_run(run_input, max_chars=runtime.settings.limits.max_message_chars)
        tools = client_tools(run_input)
    except BadRunInput as err:
        raise bad_input(err) from None
    await _check_access(access, key, target, bool(tools))
    conversation_id, models, created = await conversation_of(runtime, target, run_input.thread_id)
    caller = get_caller(request)
    board = runtime.client_tools
    listener = AnswerFollower(f"ag-ui:{uuid.uuid4().hex}")
    decisions: list[Decision] = []
    try:
        if isinstance(plan, ToolResults):
            decisions = await _client_results(runtime, caller, conversation_id, plan.results)
        elif isinstance(plan, Approvals):
            decisions = [
                Decision(approval_id=a, approved=ok, reason=why) for a, ok, why in plan.decisions
            ]
        if board is not None and not target.startswith((AGENT_PREFIX, SESSION_PREFIX)):
            board.declare(conversation_id, tools)
            if isinstance(plan, ToolResults):
                for call, output in plan.results:
                    board.provide(conversation_id, call, output)
        run = AguiRun(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            client_tools=board.names(conversation_id) if board is not None else frozenset(),
            client_results=frozenset(
                call for call, _ in (plan.results if isinstance(plan, ToolResults) else ())
            ),
            continuation=isinstance(plan, Approvals | ToolResults),
        )
        hold, first = await _admit(
            runtime, caller, plan, conversation_id, models, listener, run, decisions
        )
    except (GatewayError, DrupeError) as err:
        if created is not None:  # refused: the session made for the thread goes too
            await runtime.db.agents.delete_session(created)
        if isinstance(err, GatewayError):
            raise
        status = status_for(err)
        raise refuse(status, _KINDS.get(status, "invalid_request"), str(err)) from None
    return _events_response(_events(run, listener, hold, first))
