"""Random well-formed UI message stream chunk sequences (for hypothesis and the Node fuzz check).

``random_sequence(rng)`` draws everything from one ``random.Random``, so hypothesis can drive it
through ``st.randoms()`` and the Node cross-check can replay fixed seeds.
"""

from __future__ import annotations

import json
import random
from typing import Any

from drupe.chunks.accumulate import accumulate
from drupe.chunks.types import Chunk, UIMessage

_WORDS = ["Hello", " world", "", " ", "é", "🌍", "\n", 'a"b', "\\", "中文", "ok.", "  "]
_TOOLS = ["weather", "get-time", "search"]


def _deltas(rng: random.Random) -> list[str]:
    return [rng.choice(_WORDS) for _ in range(rng.randint(0, 5))]


def _pm(rng: random.Random) -> dict[str, Any] | None:
    return {"p": {"v": rng.randint(0, 3)}} if rng.random() < 0.25 else None


def _with_pm(chunk: Chunk, rng: random.Random) -> Chunk:
    pm = _pm(rng)
    if pm is not None:
        chunk["providerMetadata"] = pm
    return chunk


def _text(rng: random.Random, kind: str, part_id: str, close: bool) -> list[Chunk]:
    out = [_with_pm({"type": f"{kind}-start", "id": part_id}, rng)]
    out += [
        _with_pm({"type": f"{kind}-delta", "id": part_id, "delta": d}, rng) for d in _deltas(rng)
    ]
    if close:
        out.append(_with_pm({"type": f"{kind}-end", "id": part_id}, rng))
    return out


def _json_pieces(rng: random.Random, value: Any) -> list[str]:
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 4))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def _tool(rng: random.Random, call_id: str, close: bool) -> list[Chunk]:
    name = rng.choice(_TOOLS)
    dynamic = rng.random() < 0.3
    flags: Chunk = {"dynamic": True} if dynamic else {}
    if rng.random() < 0.2:
        flags["providerExecuted"] = True
    if rng.random() < 0.2:
        flags["title"] = f"Title {name}"
    value = {"q": rng.choice(_WORDS), "n": rng.randint(-5, 5), "xs": [True, None, 1.5]}
    out: list[Chunk] = [
        _with_pm(
            {"type": "tool-input-start", "toolCallId": call_id, "toolName": name, **flags}, rng
        )
    ]
    pieces = _json_pieces(rng, value)
    if not close:
        pieces = pieces[: rng.randint(0, len(pieces))]
    out += [
        {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": p} for p in pieces
    ]
    if not close:
        return out
    if rng.random() < 0.15:
        out.append(
            {
                "type": "tool-input-error",
                "toolCallId": call_id,
                "toolName": name,
                "input": "".join(pieces),
                "errorText": "bad input",
                **flags,
            }
        )
        return out
    out.append(
        _with_pm(
            {
                "type": "tool-input-available",
                "toolCallId": call_id,
                "toolName": name,
                "input": value,
                **flags,
            },
            rng,
        )
    )
    out += _tool_ending(rng, call_id, dynamic)
    return out


def _tool_ending(rng: random.Random, call_id: str, dynamic: bool) -> list[Chunk]:
    out: list[Chunk] = []
    extra: Chunk = {"dynamic": True} if dynamic else {}
    if rng.random() < 0.3:
        out.append(
            {"type": "tool-approval-request", "approvalId": f"ap-{call_id}", "toolCallId": call_id}
        )
        if rng.random() < 0.3:
            return out
    roll = rng.random()
    if roll < 0.15:
        out.append({"type": "tool-output-denied", "toolCallId": call_id})
    elif roll < 0.3:
        out.append(
            _with_pm(
                {"type": "tool-output-error", "toolCallId": call_id, "errorText": "boom", **extra},
                rng,
            )
        )
    elif roll < 0.9:
        for i in range(rng.choice([0, 0, 1, 2])):
            out.append(
                {
                    "type": "tool-output-available",
                    "toolCallId": call_id,
                    "output": {"i": i},
                    "preliminary": True,
                    **extra,
                }
            )
        out.append(
            _with_pm(
                {
                    "type": "tool-output-available",
                    "toolCallId": call_id,
                    "output": {"ok": True},
                    **extra,
                },
                rng,
            )
        )
    return out


def _misc(rng: random.Random, kind: str) -> list[Chunk]:
    if kind == "data":
        chunk: Chunk = {
            "type": rng.choice(["data-weather", "data-note"]),
            "data": {"v": rng.randint(0, 9)},
        }
        part_id = rng.choice([None, "a", "b"])
        if part_id is not None:
            chunk["id"] = part_id
        if rng.random() < 0.2:
            chunk["transient"] = True
        return [chunk]
    if kind == "source":
        return [
            {"type": "source-url", "sourceId": f"s{rng.randint(0, 9)}", "url": "https://x.example"}
        ]
    if kind == "document":
        return [
            {"type": "source-document", "sourceId": "d", "mediaType": "text/plain", "title": "T"}
        ]
    if kind == "file":
        return [_with_pm({"type": "file", "url": "data:,x", "mediaType": "text/plain"}, rng)]
    if kind == "metadata":
        meta = rng.choice(
            [{"usage": {"in": rng.randint(0, 9)}}, {"tags": ["x"]}, {"usage": {"out": 1}}, None]
        )
        return [{"type": "message-metadata", "messageMetadata": meta}]
    return [{"type": "error", "errorText": "transient failure"}]


def _interleave(rng: random.Random, a: list[Chunk], b: list[Chunk]) -> list[Chunk]:
    out: list[Chunk] = []
    i = j = 0
    while i < len(a) or j < len(b):
        if j >= len(b) or (i < len(a) and rng.random() < 0.5):
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return out


def random_chunks(rng: random.Random, *, message_id: str | None, calls: list[str]) -> list[Chunk]:
    """One well-formed stream; ``calls`` are pending tool call ids (from a seed) it may answer."""
    start: Chunk = {"type": "start"}
    if message_id is not None:
        start["messageId"] = message_id
    if rng.random() < 0.3:
        start["messageMetadata"] = {"model": "m", "usage": {"in": 1}}
    chunks = [start]
    ending = rng.choice(["finish", "finish", "abort", "none"])
    steps = rng.randint(1, 3)
    call_counter = 0
    for step in range(steps):
        chunks.append({"type": "start-step"})
        if step == 0:
            for call_id in calls:
                if rng.random() < 0.7:
                    chunks += _tool_ending(rng, call_id, dynamic=False)[-1:]
        items: list[list[Chunk]] = []
        for index in range(rng.randint(0, 5)):
            last = step == steps - 1 and ending != "finish" and index == 4
            kind = rng.choice(
                [
                    "text",
                    "text",
                    "reasoning",
                    "tool",
                    "tool",
                    "data",
                    "source",
                    "document",
                    "file",
                    "metadata",
                    "error",
                ]
            )
            if kind in ("text", "reasoning"):
                items.append(
                    _text(rng, kind, f"{kind[0]}{index}", close=not last or rng.random() < 0.5)
                )
            elif kind == "tool":
                call_counter += 1
                items.append(
                    _tool(
                        rng,
                        f"call-{step}-{call_counter}-{rng.randint(0, 999)}",
                        close=not last or rng.random() < 0.5,
                    )
                )
            else:
                items.append(_misc(rng, kind))
        while items:
            first = items.pop(0)
            if items and rng.random() < 0.3:
                first = _interleave(rng, first, items.pop(0))
            chunks += first
        if step < steps - 1 or ending == "finish":
            chunks.append({"type": "finish-step"})
    if ending == "finish":
        finish: Chunk = {
            "type": "finish",
            "finishReason": rng.choice(["stop", "tool-calls", "length"]),
        }
        if rng.random() < 0.3:
            finish["messageMetadata"] = {"usage": {"out": rng.randint(0, 9)}}
        chunks.append(finish)
    elif ending == "abort":
        chunks.append({"type": "abort"})
    return chunks


def random_sequence(rng: random.Random) -> tuple[list[Chunk], UIMessage | None]:
    """A well-formed stream and, sometimes, the stored assistant message it continues."""
    message_id = rng.choice([f"msg-{rng.randint(0, 99)}", None])
    if rng.random() < 0.3:
        seed_id = message_id or "seed-msg"
        seed = accumulate(random_chunks(rng, message_id=seed_id, calls=[]))
        open_calls = [
            p["toolCallId"]
            for p in seed["parts"]
            if str(p.get("type", "")).startswith("tool-")
            and p.get("state") in ("input-available", "approval-requested")
        ]
        return random_chunks(rng, message_id=rng.choice([seed_id, None]), calls=open_calls), seed
    return random_chunks(rng, message_id=message_id, calls=[]), None


def chaos_chunks(rng: random.Random) -> list[Chunk]:
    """Chunks of every type in random order over a few ids: mostly valid, sometimes rejected."""
    ids = ["0", "1"]
    calls = ["c0", "c1", "c2"]
    opened: dict[str, set[str]] = {"text": set(), "reasoning": set(), "tool": set(), "input": set()}

    def pick(pool: list[str], kind: str) -> str:
        live = sorted(opened[kind])
        return rng.choice(live) if live and rng.random() < 0.9 else rng.choice(pool)

    def one() -> Chunk:
        kind = rng.choice(
            [
                "start", "start-step", "finish-step", "finish", "abort", "error", "metadata",
                "text-start", "text-delta", "text-delta", "text-end",
                "reasoning-start", "reasoning-delta", "reasoning-end",
                "tool-input-start", "tool-input-delta", "tool-input-delta", "tool-input-available",
                "tool-input-error", "tool-approval-request", "tool-output-available",
                "tool-output-error", "tool-output-denied", "data", "source-url", "file",
            ]
        )  # fmt: skip
        family = kind.split("-")[0]
        if kind.endswith(("-delta", "-end")) and family in ("text", "reasoning"):
            if not opened[family] and rng.random() < 0.9:
                kind = f"{family}-start"
        elif (kind.startswith(("tool-output", "tool-approval")) and not opened["tool"]) or (
            kind == "tool-input-delta" and not opened["input"]
        ):
            kind = "tool-input-start" if rng.random() < 0.9 else kind
        if kind == "tool-input-start":
            call = rng.choice(calls)
            opened["input"].add(call)
        else:
            call = pick(calls, "input" if kind == "tool-input-delta" else "tool")
        if kind in ("tool-input-start", "tool-input-available", "tool-input-error"):
            opened["tool"].add(call)
        if kind == "finish-step":
            opened["text"].clear()
            opened["reasoning"].clear()
        if kind == "start":
            chunk: Chunk = {"type": "start"}
            if rng.random() < 0.5:
                chunk["messageId"] = rng.choice(["m1", "m2"])
            if rng.random() < 0.3:
                chunk["messageMetadata"] = {"a": {"b": rng.randint(0, 3)}}
            return chunk
        if kind in ("start-step", "finish-step", "abort"):
            return {"type": kind}
        if kind == "finish":
            return {"type": "finish", "finishReason": "stop"}
        if kind == "error":
            return {"type": "error", "errorText": "e"}
        if kind == "metadata":
            return {
                "type": "message-metadata",
                "messageMetadata": rng.choice([{"x": [1]}, {"a": {"c": 1}}, None]),
            }
        if kind.startswith(("text", "reasoning")):
            part_id = rng.choice(ids) if kind.endswith("start") else pick(ids, family)
            if kind.endswith("start"):
                opened[family].add(part_id)
            elif kind.endswith("end"):
                opened[family].discard(part_id)
            chunk = {"type": kind, "id": part_id}
            if kind.endswith("delta"):
                chunk["delta"] = rng.choice(_WORDS)
            return _with_pm(chunk, rng)
        if kind == "tool-input-start":
            chunk = {"type": kind, "toolCallId": call, "toolName": rng.choice(_TOOLS)}
            if rng.random() < 0.3:
                chunk["dynamic"] = True
            if rng.random() < 0.2:
                chunk["inputEncoding"] = "text"
            if rng.random() < 0.2:
                chunk["title"] = "T"
            return _with_pm(chunk, rng)
        if kind == "tool-input-delta":
            return {
                "type": kind,
                "toolCallId": call,
                "inputTextDelta": rng.choice(['{"a', '":', " [1,", "tr", '"x"}', "}"]),
            }
        if kind in ("tool-input-available", "tool-input-error"):
            chunk = {
                "type": kind,
                "toolCallId": call,
                "toolName": rng.choice(_TOOLS),
                "input": {"k": 1},
            }
            if kind == "tool-input-error":
                chunk["errorText"] = "bad"
            if rng.random() < 0.3:
                chunk["dynamic"] = True
            if rng.random() < 0.2:
                chunk["providerExecuted"] = rng.choice([True, False])
            return _with_pm(chunk, rng)
        if kind == "tool-approval-request":
            return {"type": kind, "toolCallId": call, "approvalId": "ap"}
        if kind == "tool-output-available":
            chunk = {"type": kind, "toolCallId": call, "output": rng.randint(0, 5)}
            if rng.random() < 0.3:
                chunk["preliminary"] = True
            return _with_pm(chunk, rng)
        if kind == "tool-output-error":
            return _with_pm({"type": kind, "toolCallId": call, "errorText": "x"}, rng)
        if kind == "tool-output-denied":
            return {"type": kind, "toolCallId": call}
        return _misc(rng, {"data": "data", "source-url": "source", "file": "file"}[kind])[0]

    return [{"type": "start"}, {"type": "start-step"}] + [one() for _ in range(rng.randint(3, 30))]
