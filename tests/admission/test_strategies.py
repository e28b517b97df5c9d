"""Issue 8, point 8: every double-texting strategy is checked before any side effect.

Each (provider, strategy) pair either does what the strategy says, or is refused with the live
answer untouched: still streaming, never aborted, finished with its whole text, and nothing
written for the refused message. Agent sessions: ``tests/sessions/test_strategies.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from drupe.admission.base import Strategy, Submit
from drupe.errors import AdmissionError, ValidationError
from drupe.testing.recording import RecordingListener
from tests.streaming.conftest import Runtime
from tests.streaming.sources import Source, text_chunks

HELLO = [{"type": "text", "text": "hello"}]
AGAIN = [{"type": "text", "text": "and again"}]
EMPTY = [{"type": "text", "text": "   "}]


async def _live_answer(runtime: Runtime, *, ephemeral: bool) -> tuple[str, Source, Any]:
    cid = runtime.ephemeral.create() if ephemeral else (await runtime.db.conversations.create()).id
    source = runtime.script("scripted:default", Source(text_chunks("m", ["a", "b"]), hold_at=4))
    tab = RecordingListener("tab")
    await runtime.dispatcher.dispatch(Submit(conversation_id=cid, parts=HELLO), [tab])
    await source.reached.wait()
    return cid, source, tab


async def _rows(runtime: Runtime, cid: str, *, ephemeral: bool) -> list[tuple[str, str]]:
    if ephemeral:
        conversation = runtime.ephemeral.get(cid)
        assert conversation is not None
        return [(r.message["role"], r.status) for r in conversation.rows]
    return [(r.role, r.status) for r in await runtime.db.messages.list_for_conversation(cid)]


REFUSED: list[tuple[str, Strategy, list[dict[str, Any]], list[str], str]] = [
    # (provider, strategy, parts, models, expected refusal)
    ("ephemeral", "rollback", AGAIN, [], "unsupported"),
    ("ephemeral", "enqueue", AGAIN, [], "live"),
    ("ephemeral", "reject", AGAIN, [], "busy"),
    ("ephemeral", "interrupt", EMPTY, [], "validation"),
    ("persistent", "reject", AGAIN, [], "busy"),
    ("persistent", "interrupt", AGAIN, ["nocolon"], "validation"),
    ("persistent", "rollback", AGAIN, ["nocolon"], "validation"),
    ("persistent", "rollback", EMPTY, [], "validation"),
    ("persistent", "enqueue", EMPTY, [], "validation"),
]


@pytest.mark.parametrize(
    ("provider", "strategy", "parts", "models", "refusal"),
    REFUSED,
    ids=[f"{p}-{s}-{r}-{i}" for i, (p, s, _, _, r) in enumerate(REFUSED)],
)
async def test_a_refused_double_text_leaves_the_live_answer_untouched(
    runtime: Runtime,
    provider: str,
    strategy: Strategy,
    parts: list[dict[str, Any]],
    models: list[str],
    refusal: str,
) -> None:
    ephemeral = provider == "ephemeral"
    cid, source, tab = await _live_answer(runtime, ephemeral=ephemeral)
    stream = runtime.manager.get(cid)
    before = await _rows(runtime, cid, ephemeral=ephemeral)
    submit = Submit(conversation_id=cid, parts=parts, model_ids=models, strategy=strategy)
    with pytest.raises((AdmissionError, ValidationError)) as info:
        await runtime.dispatcher.dispatch(submit)
    if refusal == "validation":
        assert isinstance(info.value, ValidationError)
    else:
        assert isinstance(info.value, AdmissionError) and info.value.reason == refusal
    # Untouched: the same stream is still live, its execution was never asked to stop.
    assert runtime.manager.get(cid) is stream and runtime.manager.is_live(cid)
    assert stream is not None and stream.executions["scripted:default"].abort_reason is None
    assert await _rows(runtime, cid, ephemeral=ephemeral) == before
    source.released.set()
    await tab.wait_done()
    assert tab.statuses() == ["success"]
    assert "".join(p.get("text", "") for p in tab.message()["parts"]) == "ab"
    await runtime.manager.wait_settled(cid)
    assert await _rows(runtime, cid, ephemeral=ephemeral) == [
        ("user", "success"),
        ("assistant", "success"),
    ]


async def test_ephemeral_interrupt_stops_the_answer_and_answers_the_new_message(
    runtime: Runtime,
) -> None:
    cid, _source, tab = await _live_answer(runtime, ephemeral=True)
    result = await runtime.dispatcher.dispatch(
        Submit(conversation_id=cid, parts=AGAIN, strategy="interrupt")
    )
    assert result.mode == "started"
    assert tab.statuses() == ["paused"]
    await runtime.manager.wait_settled(cid)
    assert await _rows(runtime, cid, ephemeral=True) == [
        ("user", "success"),
        ("assistant", "paused"),
        ("user", "success"),
        ("assistant", "success"),
    ]


def test_each_provider_states_its_strategies() -> None:
    from drupe.admission.agent_session import AgentSessionProvider
    from drupe.admission.ephemeral import EphemeralProvider
    from drupe.admission.persistent import PersistentProvider

    assert PersistentProvider.strategies == {"enqueue", "interrupt", "reject", "rollback"}
    assert EphemeralProvider.strategies == {"interrupt", "reject"}
    assert AgentSessionProvider.strategies == {"enqueue", "reject"}
