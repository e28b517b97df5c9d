"""``drupe.chunks.sse``: SSE framing of UI message stream chunks."""

from __future__ import annotations

import orjson
import pytest

from drupe.chunks.sse import DONE_FRAME, UI_MESSAGE_STREAM_HEADERS, encode_chunk, encode_sse
from drupe.errors import UsageError


def _parse_events(body: bytes) -> list[dict[str, str]]:
    """A minimal SSE parser following the WHATWG rules the AI SDK's eventsource-parser uses."""
    events: list[dict[str, str]] = []
    fields: dict[str, list[str]] = {}
    for line in body.decode().replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if fields:
                events.append({k: "\n".join(v) for k, v in fields.items()})
            fields = {}
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))
    return events


def test_headers_are_the_ui_message_stream_v1_headers() -> None:
    assert UI_MESSAGE_STREAM_HEADERS == {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "connection": "keep-alive",
        "x-vercel-ai-ui-message-stream": "v1",
        "x-accel-buffering": "no",
    }
    assert DONE_FRAME == b"data: [DONE]\n\n"


def test_encode_chunk_is_one_data_line() -> None:
    chunk = {"type": "text-delta", "id": "t", "delta": "a\nb\r\nc"}
    frame = encode_chunk(chunk)
    assert frame == b"data: " + orjson.dumps(chunk) + b"\n\n"
    assert _parse_events(frame) == [{"data": orjson.dumps(chunk).decode()}]


def test_encode_chunk_puts_the_cursor_in_an_id_line() -> None:
    frame = encode_chunk({"type": "start"}, event_id="exec-1:42")
    assert frame == b'id: exec-1:42\ndata: {"type":"start"}\n\n'
    assert _parse_events(frame) == [{"id": "exec-1:42", "data": '{"type":"start"}'}]


def test_encode_sse_splits_multi_line_data() -> None:
    frame = encode_sse(b"one\ntwo\r\nthree\rfour", event_id="7", event="note")
    assert frame == b"id: 7\nevent: note\ndata: one\ndata: two\ndata: three\ndata: four\n\n"
    assert _parse_events(frame) == [{"id": "7", "event": "note", "data": "one\ntwo\nthree\nfour"}]
    assert encode_sse(b"") == b"data: \n\n"
    assert encode_sse(b"x\n") == b"data: x\ndata: \n\n"


def test_a_stream_of_frames_parses_back_to_the_chunks() -> None:
    chunks = [
        {"type": "start", "messageId": "m"},
        {"type": "text-delta", "id": "t", "delta": "é\n"},
    ]
    body = b"".join(encode_chunk(c, event_id=str(i)) for i, c in enumerate(chunks)) + DONE_FRAME
    events = _parse_events(body)
    assert [orjson.loads(e["data"]) for e in events[:-1]] == chunks
    assert events[-1] == {"data": "[DONE]"}


@pytest.mark.parametrize("bad", ["a\nb", "a\rb"])
def test_id_and_event_must_be_one_line(bad: str) -> None:
    with pytest.raises(UsageError):
        encode_sse(b"x", event_id=bad)
    with pytest.raises(UsageError):
        encode_sse(b"x", event=bad)
    with pytest.raises(UsageError):
        encode_chunk({"type": "start"}, event_id=bad)
