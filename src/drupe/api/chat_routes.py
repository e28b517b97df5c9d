"""The AI SDK UI-stream routes: submit, resume, stop, approvals.

* ``POST /api/chat`` takes the ``DefaultChatTransport`` body. The server is the source of
  truth: only the LAST user message is read; the history comes from Drupe's own tree. An
  unknown conversation id is created. The answer is the UI message stream of the turn's first
  execution; for a steer (a submit while the conversation is live) it is the stream of the
  continuation that answers it, after the running turn. A steer the running turn will not
  answer (it was stopped or failed: ``drop``; it waits for tool approvals: ``hold``) gets an
  ``error`` frame saying so, then ``[DONE]``: the stored message stays visibly unanswered.
* ``GET /api/chat/{id}/stream`` resumes: the live execution from its ``start`` (compact
  replay), then live. With ``Last-Event-ID: <turn>/<seq>`` of the turn it continues exactly
  after that event. An answer that ended within the grace period (or waits for a tool
  approval) is replayed with its end (``finish``, ``abort`` or ``error``) and ``[DONE]``;
  204 only when nothing is live and the grace period is over.
* ``background: true`` in the body: the turn is admitted with no connection attached and the
  answer is ``202`` with its run (``GET /api/runs/{id}``); it continues whatever any client does
  and is watched over the resume route.
* ``POST /api/chat/{id}/stop`` returns after the partial answer is persisted.
* Closing a stream's connection detaches its listener; it never stops the answer.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from drupe.admission.base import DispatchRequest, Regenerate, Submit
from drupe.admission.commands import answer_approvals, stop_conversation
from drupe.api.schemas import ApprovalsRequest, ChatRequest, UIMessageIn
from drupe.api.task_routes import run_json
from drupe.errors import ConfigError, UnknownConversationError, ValidationError
from drupe.http.errors import PayloadTooLarge
from drupe.http.sse_response import SseResponse
from drupe.http.state import attach, ensure_known, get_runtime
from drupe.streaming.approvals import Decision
from drupe.streaming.listeners.sse import SseListener, parse_cursor

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["router"]

router = APIRouter(tags=["chat"])
RESERVED_PREFIXES = ("agent-session:",)
"""Conversation ids a submit never creates: their own provider (agent sessions) validates them."""
_listener_ids = itertools.count(1)

_STREAM_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The AI SDK UI message stream (SSE, ends with `data: [DONE]`).",
        "content": {"text/event-stream": {}},
    }
}


class StopResult(BaseModel):
    stopped: bool


class ApprovalResult(BaseModel):
    ok: bool
    continued: bool
    messageId: str | None = None
    pending: int = 0
    reason: str | None = None


def _new_listener() -> SseListener:
    return SseListener(f"sse:{next(_listener_ids)}")


def _detach(runtime: Runtime, conversation_id: str, listener: SseListener) -> None:
    listener.buffer.disconnected = True
    runtime.manager.detach(conversation_id, listener.listener_id)


def _check_models(runtime: Runtime, models: Sequence[str] | None) -> list[str]:
    wanted = list(models or ())
    limit = runtime.settings.limits.max_models_per_turn
    if len(wanted) > limit:
        raise ValidationError(f"at most {limit} models per turn, got {len(wanted)}")
    for model_id in wanted:
        try:
            runtime.models.resolve(model_id)
        except ConfigError as err:
            raise ValidationError(f"unknown model {model_id!r}: {err}") from err
    return wanted


def _last_user_parts(runtime: Runtime, messages: Sequence[UIMessageIn]) -> list[dict[str, Any]]:
    last = next((m for m in reversed(messages) if m.role == "user"), None)
    if last is None:
        raise ValidationError("messages: a submit needs at least one user message")
    if messages[-1].role != "user":
        raise ValidationError(
            "messages: the last message must be the user message to answer "
            "(tool approvals go to POST /api/chat/{id}/approvals)"
        )
    chars = sum(len(p.get("text", "")) for p in last.parts if isinstance(p.get("text"), str))
    limit = runtime.settings.limits.max_message_chars
    if chars > limit:
        raise PayloadTooLarge(f"the message has {chars} characters; the limit is {limit}")
    return list(last.parts)


async def _regenerate_target(runtime: Runtime, conversation_id: str, message_id: str | None) -> str:
    """The user row to answer again: ``messageId``'s (or its parent), else the newest one."""
    if message_id is not None:
        row = await runtime.db.messages.get(message_id)
        if row is not None and row.conversation_id == conversation_id:
            if row.role == "user":
                return row.id
            if row.parent_id is not None:
                return row.parent_id
    rows = await runtime.db.messages.list_for_conversation(conversation_id)
    last_user = next((r for r in reversed(rows) if r.role == "user"), None)
    if last_user is None:
        raise ValidationError(f"conversation {conversation_id!r} has no user message to answer")
    return last_user.id


@router.post("/api/chat", responses=_STREAM_RESPONSES, response_class=Response)
async def post_chat(body: ChatRequest, request: Request) -> Response:
    """Submit (or regenerate) and stream the answer as the AI SDK UI message stream."""
    runtime = get_runtime(request)
    conversation_id = body.id
    models = _check_models(runtime, body.models)
    ephemeral = runtime.ephemeral.get(conversation_id) is not None
    owned = conversation_id.startswith(RESERVED_PREFIXES)  # their provider validates them
    if not ephemeral and not owned and await runtime.db.conversations.get(conversation_id) is None:
        if body.trigger == "regenerate-message":
            raise UnknownConversationError(conversation_id)
        await runtime.db.conversations.ensure(conversation_id)
    dispatch: DispatchRequest
    if body.trigger == "submit-message":
        parts = _last_user_parts(runtime, body.messages)
        dispatch = Submit(
            conversation_id=conversation_id,
            parts=parts,
            model_ids=models,
            strategy=body.strategy,
        )
    elif ephemeral:
        raise ValidationError("an ephemeral conversation cannot regenerate an answer")
    else:
        user_id = await _regenerate_target(runtime, conversation_id, body.messageId)
        dispatch = Regenerate(
            conversation_id=conversation_id, user_message_id=user_id, model_ids=models
        )
    if body.background:
        if runtime.tasks is None:
            raise RuntimeError("the task service is not running")
        run = await runtime.tasks.start_chat_run(dispatch)
        return JSONResponse(run_json(run), status_code=202)
    if runtime.cluster_chat is not None and isinstance(dispatch, Submit | Regenerate):
        return await _post_chat_cluster(runtime, dispatch)
    listener = _new_listener()
    cleanup: list[Callable[[], None]] = []
    result = await runtime.dispatcher.dispatch(dispatch, [listener])
    if result.mode == "started" and result.turn_id is not None and result.execution_ids:
        listener.follow(result.turn_id, result.execution_ids[0])
    elif result.steer == "drop":
        listener.close_with_error(
            "the message was stored but not answered: the running turn ended first"
        )
    elif result.steer == "queue-and-hold":
        listener.close_with_error(
            "the message was stored; it is answered once the pending tool approvals are decided"
        )
    elif result.turn_id is None:
        # No stream to ride on (it was already evicted): follow the next turn that starts.
        listener.follow_next_turn(None)
        cleanup.append(_attach_to_next_stream(runtime, conversation_id, listener))
    else:
        listener.follow_next_turn(result.turn_id)

    def on_close() -> None:
        _detach(runtime, conversation_id, listener)
        for undo in cleanup:
            undo()  # a client that left before the next turn started leaves no observer behind

    return SseResponse(listener.buffer, on_close=on_close)


async def _post_chat_cluster(runtime: Runtime, dispatch: Submit | Regenerate) -> Response:
    """Cluster mode: the owner admits the turn; this node follows its chunk log."""
    cluster = runtime.cluster_chat
    assert cluster is not None
    result = await cluster.dispatch(dispatch)
    listener = _new_listener()
    follower = cluster.follower(dispatch.conversation_id, listener)
    if result.mode == "started" and result.turn_id is not None and result.execution_ids:
        listener.follow(result.turn_id, result.execution_ids[0])
        await follower.follow_turn(result.turn_id)
    elif result.steer == "drop":
        listener.close_with_error(
            "the message was stored but not answered: the running turn ended first"
        )
    elif result.steer == "queue-and-hold":
        listener.close_with_error(
            "the message was stored; it is answered once the pending tool approvals are decided"
        )
    else:
        listener.follow_next_turn(result.turn_id)
        await follower.follow_next(result.turn_id)

    def on_close() -> None:
        listener.buffer.disconnected = True
        follower.close()

    return SseResponse(listener.buffer, on_close=on_close)


async def _resume_cluster(runtime: Runtime, conversation_id: str, cursor: str | None) -> Response:
    """Cluster mode: resume from the chunk log of the conversation's newest turn, on any node."""
    cluster = runtime.cluster_chat
    assert cluster is not None
    latest = await cluster.latest_turn(conversation_id)
    if latest is None:
        await ensure_known(runtime, conversation_id)
        return Response(status_code=204)
    turn_id, _announced_ms = latest
    parsed = parse_cursor(cursor)
    after = parsed[1] if parsed is not None and parsed[0] == turn_id else None
    node = runtime.cluster
    assert node is not None
    if parsed is not None and after is None:
        # A cursor of an earlier turn whose answer was lost and is being answered again
        # (``on_owner_loss = "retry"``): resume there; the follower moves on to the new attempt.
        earlier = await node.log.tail(node.log.key(conversation_id, parsed[0]))
        if any(e.retried_as is not None for e in earlier):
            turn_id, after = parsed
    # The newest entries say whether the turn ended (its terminals are the last entries).
    entries = await node.log.tail(node.log.key(conversation_id, turn_id))
    if not entries:
        return Response(status_code=204)
    ended = [e for e in entries if e.terminal is not None and e.done]
    grace_ms = runtime.settings.stream.grace_period * 1000
    if ended and int(ended[-1].cursor.split("-")[0]) + grace_ms < time.time() * 1000:
        return Response(status_code=204)  # ended, and its grace period is over
    listener = SseListener(f"sse:{next(_listener_ids)}")
    listener.follow_next_turn(None)  # the first execution that speaks in this turn
    follower = cluster.follower(conversation_id, listener)
    await follower.follow_turn(turn_id, after=after)

    def on_close() -> None:
        listener.buffer.disconnected = True
        follower.close()

    return SseResponse(listener.buffer, on_close=on_close)


def _attach_to_next_stream(
    runtime: Runtime, conversation_id: str, listener: SseListener
) -> Callable[[], None]:
    """Attach ``listener`` to the conversation's next stream; returns the undo (idempotent)."""
    manager = runtime.manager
    removers: list[Callable[[], None]] = []

    def remove() -> None:
        for undo in removers:
            undo()

    def observer(observed: str, record: Any) -> None:
        if observed != conversation_id or record.status != "pending":
            return
        remove()
        if listener.is_alive():
            attach(manager, conversation_id, listener)

    removers.append(manager.add_status_observer(observer))
    stream = manager.get(conversation_id)
    if stream is not None and stream.is_live:  # started between dispatch and now
        remove()
        attach(manager, conversation_id, listener)
    return remove


@router.get(
    "/api/chat/{conversation_id}/stream",
    responses={
        **_STREAM_RESPONSES,
        204: {"description": "Nothing is live and no answer ended within the grace period."},
    },
    response_class=Response,
)
async def resume_chat(
    conversation_id: str,
    request: Request,
    last_event_id: str | None = Header(default=None, alias="Last-Event-ID"),
) -> Response:
    """Resume the answer: live, or just ended (grace period); 204 when nothing is left."""
    runtime = get_runtime(request)
    if runtime.cluster_chat is not None:
        return await _resume_cluster(runtime, conversation_id, last_event_id)
    stream = runtime.manager.get(conversation_id)
    if stream is None:
        await ensure_known(runtime, conversation_id)
        return Response(status_code=204)
    cursor = parse_cursor(last_event_id)
    after = cursor[1] if cursor is not None and cursor[0] == stream.turn_id else None
    if not stream.is_live:
        # Ended within the grace period, or waiting for a tool approval: replay the finished
        # message (exactly after the cursor when one is given) and its end.
        first = next(iter(stream.executions))
        ended = SseListener(
            f"sse:{next(_listener_ids)}", turn_id=stream.turn_id, execution_id=first
        )
        if not await runtime.manager.subscriptions.replay_ended(
            conversation_id, ended, execution_id=first, after=after
        ):
            return Response(status_code=204)
        return SseResponse(ended.buffer, on_close=lambda: None)
    execution = next((e for e in stream.executions.values() if e.status == "streaming"), None)
    if execution is None:
        return Response(status_code=204)
    listener = SseListener(
        f"sse:{next(_listener_ids)}", turn_id=stream.turn_id, execution_id=execution.execution_id
    )
    # Replay and registration happen in one synchronous call: nothing lost, nothing doubled.
    attach(
        runtime.manager,
        conversation_id,
        listener,
        after=after,
        execution_ids=[execution.execution_id],
    )
    return SseResponse(
        listener.buffer, on_close=lambda: _detach(runtime, conversation_id, listener)
    )


@router.post("/api/chat/{conversation_id}/stop", response_model=StopResult)
async def stop_chat(conversation_id: str, request: Request) -> StopResult:
    """Stop the live answer; returns after its partial was persisted."""
    runtime = get_runtime(request)
    if not runtime.manager.is_live(conversation_id):
        await ensure_known(runtime, conversation_id)
    if runtime.cluster_chat is not None:  # the owner stops it, wherever it runs
        return StopResult(stopped=await runtime.cluster_chat.stop(conversation_id))
    # An agent session may be between turns (a steer roll, a queued follow-up): the host
    # stops the runtime turn, drops the queue and closes the connection.
    stopped = await stop_conversation(runtime.manager, runtime.sessions, conversation_id)
    return StopResult(stopped=stopped)


@router.post("/api/chat/{conversation_id}/approvals", response_model=ApprovalResult)
async def post_approvals(
    conversation_id: str, body: ApprovalsRequest, request: Request
) -> ApprovalResult:
    """Answer pending tool approvals; an answered turn continues in the same message."""
    runtime = get_runtime(request)
    await ensure_known(runtime, conversation_id)
    decisions = [
        Decision(approval_id=d.approvalId, approved=d.approved, reason=d.reason)
        for d in body.decisions
    ]
    if runtime.cluster_chat is not None:  # the owner answers, wherever it runs
        outcome = await runtime.cluster_chat.approvals(conversation_id, decisions)
    else:
        outcome = await answer_approvals(
            runtime.approvals, runtime.sessions, conversation_id, decisions
        )
    return ApprovalResult(
        ok=outcome.ok,
        continued=outcome.continued,
        messageId=outcome.message_id,
        pending=outcome.pending,
        reason=outcome.reason,
    )
