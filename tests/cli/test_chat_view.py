"""``AnswerView``: UI chunks folded into whole lines, a partial line, and status lines."""

from __future__ import annotations

from drupe.cli.chat_view import AnswerView, Line


def test_text_is_printed_by_whole_lines_under_one_label() -> None:
    view = AnswerView(model="m:a")
    assert view.feed({"type": "start", "messageId": "x"}) == []
    assert view.feed({"type": "text-delta", "id": "t", "delta": "Hello, "}) == [
        Line("label", "m:a")
    ]
    assert view.partial == "Hello, "
    assert view.feed({"type": "text-delta", "id": "t", "delta": "world.\nSecond"}) == [
        Line("text", "Hello, world.")
    ]
    assert view.partial == "Second"
    assert view.feed({"type": "text-delta", "id": "t", "delta": " line"}) == []
    meta = {"modelId": "m:b", "usage": {"inputTokens": 3, "outputTokens": 5}}
    assert view.feed({"type": "message-metadata", "messageMetadata": meta}) == []
    assert view.feed({"type": "finish"}) == [
        Line("text", "Second line"),
        Line("status", "done (m:b, 5 tokens)"),
    ]
    assert view.close() == []


def test_reasoning_tools_errors_and_stops_are_their_own_lines() -> None:
    view = AnswerView(model="m")
    lines = view.feed({"type": "reasoning-delta", "id": "r", "delta": "thinking"})
    lines += view.feed({"type": "text-delta", "id": "t", "delta": "ok"})
    lines += view.feed({"type": "tool-input-start", "toolCallId": "c", "toolName": "search"})
    lines += view.feed({"type": "tool-output-available", "toolCallId": "c", "output": {"n": 1}})
    lines += view.feed({"type": "error", "errorText": "boom"})
    lines += view.feed({"type": "abort"})
    assert lines == [
        Line("label", "m"),
        Line("reasoning", "thinking"),
        Line("text", "ok"),
        Line("status", "tool search called"),
        Line("status", 'tool result: {"n":1}'),
        Line("error", "error: boom"),
        Line("status", "stopped (m)"),
    ]
    assert view.feed({"type": "finish"}) == []  # stopped already: no second status line


def test_a_stream_cut_short_says_so() -> None:
    view = AnswerView(model="m")
    view.feed({"type": "text-delta", "id": "t", "delta": "half"})
    assert view.close() == [Line("text", "half"), Line("status", "answer ended early (m)")]
