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
* A conversation's first message titles it (first words, ``drupe.api.titles``); a title model,
  when configured, renames it after the first answer (``drupe.api.model_titles``).
* ``POST /api/chat/{id}/stop`` returns after the partial answer is persisted.
* Closing a stream's connection detaches its listener; it never stops the answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from drupe.admission.base import Regenerate, Submit
from drupe.api.model_titles import get_titler
from drupe.api.schemas import ApprovalsRequest, ChatRequest, UIMessageIn
from drupe.api.task_routes import run_json
from drupe.api.titles import title_if_untitled
from drupe.errors import ConfigError, ValidationError
from drupe.http.errors import PayloadTooLarge
from drupe.http.sse_response import SseResponse
from drupe.http.state import get_caller, get_runtime
from drupe.streaming.approval_rules import Decision
from drupe.streaming.listeners.sse import SseListener

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = ["router"]

router = APIRouter(tags=["chat"])
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
    caller = get_caller(request)
    conversations = runtime.conversations
    conversation_id = body.id
    models = _check_models(runtime, body.models)
    dispatch: Submit | Regenerate
    if body.newRoot and (body.parentId is not None or body.trigger != "submit-message"):
        raise ValidationError("newRoot: only for a submit-message without parentId")
    if body.newRoot and runtime.ephemeral.get(conversation_id) is not None:
        raise ValidationError("an ephemeral conversation has one branch: newRoot is not allowed")
    if body.trigger == "submit-message":
        parts = _last_user_parts(runtime, body.messages)
        dispatch = Submit(
            conversation_id=conversation_id,
            parts=parts,
            parent_id=body.parentId,
            new_root=body.newRoot,
            model_ids=models,
            strategy=body.strategy,
        )
    elif runtime.ephemeral.get(conversation_id) is not None:
        raise ValidationError("an ephemeral conversation cannot regenerate an answer")
    else:
        await conversations.get(caller, conversation_id)  # unknown: 404
        user_id = await _regenerate_target(runtime, conversation_id, body.messageId)
        dispatch = Regenerate(
            conversation_id=conversation_id, user_message_id=user_id, model_ids=models
        )
    if body.background:
        if runtime.tasks is None:
            raise RuntimeError("the task service is not running")
        run = await runtime.tasks.start_chat_run(dispatch, caller)
        if isinstance(dispatch, Submit):
            await title_if_untitled(runtime, conversation_id, dispatch.parts)
        return JSONResponse(run_json(run), status_code=202)
    listener = _new_listener()
    admitted = await conversations.submit(caller, dispatch, listener=listener)
    if isinstance(dispatch, Submit):
        title = await title_if_untitled(runtime, conversation_id, dispatch.parts)
        answers = admitted.result.placeholder_ids
        if title is not None and answers:  # the first exchange: a title model may name it
            get_titler(request).start(runtime, conversation_id, title, answers[0])
    if admitted.result.steer == "drop":
        listener.close_with_error(
            "the message was stored but not answered: the running turn ended first"
        )
    elif admitted.result.steer == "queue-and-hold":
        listener.close_with_error(
            "the message was stored; it is answered once the pending tool approvals are decided"
        )

    def on_close() -> None:
        listener.buffer.disconnected = True
        admitted.close()  # a client that left early leaves no listener or observer behind

    return SseResponse(listener.buffer, on_close=on_close)


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
    listener = _new_listener()
    subscription = await runtime.conversations.resume(
        get_caller(request), conversation_id, listener, last_event_id
    )
    if subscription is None:
        return Response(status_code=204)

    def on_close() -> None:
        listener.buffer.disconnected = True
        subscription.close()

    return SseResponse(listener.buffer, on_close=on_close)


@router.post("/api/chat/{conversation_id}/stop", response_model=StopResult)
async def stop_chat(conversation_id: str, request: Request) -> StopResult:
    """Stop the live answer; returns after its partial was persisted."""
    runtime = get_runtime(request)
    stopped = await runtime.conversations.stop(get_caller(request), conversation_id)
    return StopResult(stopped=stopped)


@router.post("/api/chat/{conversation_id}/approvals", response_model=ApprovalResult)
async def post_approvals(
    conversation_id: str, body: ApprovalsRequest, request: Request
) -> ApprovalResult:
    """Answer pending tool approvals; an answered turn continues in the same message."""
    runtime = get_runtime(request)
    decisions = [
        Decision(approval_id=d.approvalId, approved=d.approved, reason=d.reason)
        for d in body.decisions
    ]
    outcome = await runtime.conversations.approve(get_caller(request), conversation_id, decisions)
    return ApprovalResult(
        ok=outcome.ok,
        continued=outcome.continued,
        messageId=outcome.message_id,
        pending=outcome.pending,
        reason=outcome.reason,
    )
