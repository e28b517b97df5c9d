"""``gateway.request_values``: the values the three dialects read alike, and their 400s."""

from __future__ import annotations

import pytest

from drupe.gateway.request_values import sampling_settings, tool_call_part


class Bad(Exception):
    pass


def test_sampling_settings_take_the_first_bound_present_and_the_numbers_as_floats() -> None:
    body = {"max_completion_tokens": None, "max_tokens": 64, "temperature": 1, "top_p": 0.5}
    settings = sampling_settings(body, Bad, max_tokens=("max_completion_tokens", "max_tokens"))
    assert settings == {"max_tokens": 64, "temperature": 1.0, "top_p": 0.5}
    assert isinstance(settings["temperature"], float)
    assert sampling_settings({}, Bad, max_tokens=("max_tokens",)) == {}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"max_output_tokens": 0}, "'max_output_tokens' must be a positive integer"),
        ({"max_output_tokens": True}, "'max_output_tokens' must be a positive integer"),
        ({"temperature": "hot"}, "'temperature' must be a number"),
        ({"top_p": False}, "'top_p' must be a number"),
    ],
)
def test_bad_sampling_values_name_their_field(body: dict[str, object], message: str) -> None:
    with pytest.raises(Bad, match=message):
        sampling_settings(body, Bad, max_tokens=("max_output_tokens",))


def test_a_tool_call_becomes_an_input_available_part() -> None:
    part = tool_call_part("c1", "get_time", '{"tz": "UTC"}', bad_json="x")
    assert part == {
        "type": "dynamic-tool",
        "toolName": "get_time",
        "toolCallId": "c1",
        "state": "input-available",
        "input": {"tz": "UTC"},
    }
    assert tool_call_part("c2", "t", None, bad_json="x")["input"] == {}
    assert tool_call_part("c3", "t", "[1, 2]", bad_json="x")["input"] == {}
    assert tool_call_part("c4", "t", {"a": 1}, bad_json="x")["input"] == {"a": 1}


def test_tool_call_arguments_that_are_not_json_raise_the_dialects_message() -> None:
    with pytest.raises(ValueError, match="arguments are not valid JSON"):
        tool_call_part("c1", "t", "{not json", bad_json="c1: arguments are not valid JSON")
