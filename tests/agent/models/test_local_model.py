"""The bundled local model: message rendering (always) and real generation (``-m local``)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters

from drupe.agent.models import ModelRegistry, load_model_config
from drupe.agent.models.local import LOCAL_MODEL_NOTE, LocalModel
from drupe.agent.models.local_llama import DEFAULT_GENERATION
from drupe.agent.models.local_prompt import QA_PREAMBLE, to_chat_messages, to_qa_prompt


def test_messages_render_as_alternating_gemma_turns() -> None:
    messages = [
        ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("Weather?")]),
        ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="c")]),
        ModelRequest(parts=[ToolReturnPart("get_weather", "sunny", tool_call_id="c")]),
        ModelResponse(parts=[TextPart("It is sunny.")]),
        ModelRequest(parts=[UserPromptPart("Thanks")], instructions="Answer in English."),
    ]
    assert to_chat_messages(messages) == [
        {"role": "user", "content": "Be brief.\n\nAnswer in English.\n\nWeather?"},
        {"role": "assistant", "content": "(calls get_weather)"},
        {"role": "user", "content": "Result of get_weather: sunny"},
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "Thanks"},
    ]


def test_the_qa_prompt_is_a_few_shot_transcript_ending_with_answer() -> None:
    messages = [
        ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("Capital of\nSpain?")]),
        ModelResponse(parts=[TextPart("Madrid.")]),
        ModelRequest(parts=[UserPromptPart("And of Portugal?")]),
    ]
    assert to_qa_prompt(messages) == (
        "Be brief.\n\n"
        + QA_PREAMBLE
        + "Question: Capital of Spain?\nAnswer: Madrid.\n\n"
        + "Question: And of Portugal?\nAnswer:"
    )


def test_the_default_generation_is_short_penalised_and_stops_at_a_new_question() -> None:
    sampling = DEFAULT_GENERATION.sampling()
    assert sampling["max_tokens"] == 128 and sampling["repeat_penalty"] > 1.0
    assert "\nQuestion:" in sampling["stop"] and "<start_of_turn>" in sampling["stop"]
    request = DEFAULT_GENERATION.with_settings({"max_tokens": 16, "temperature": 0.0})
    assert (request.max_tokens, request.temperature) == (16, 0.0)
    assert request.repeat_penalty == DEFAULT_GENERATION.repeat_penalty


def test_long_histories_drop_the_oldest_turns_first() -> None:
    messages = []
    for index in range(40):
        messages.append(ModelRequest(parts=[UserPromptPart(f"question {index} " + "x" * 200)]))
        messages.append(ModelResponse(parts=[TextPart(f"answer {index}")]))
    messages.append(ModelRequest(parts=[UserPromptPart("last question")]))
    chat = to_chat_messages(messages)
    assert chat[-1] == {"role": "user", "content": "last question"}
    assert chat[0]["role"] == "user"
    assert sum(len(turn["content"]) for turn in chat) <= 4300
    assert "question 0 " not in " ".join(turn["content"] for turn in chat)


def test_the_note_says_it_is_a_base_model() -> None:
    assert LOCAL_MODEL_NOTE.startswith("base model: fluent but off-topic")
    assert "config.toml" in LOCAL_MODEL_NOTE and "OPENAI_API_KEY" in LOCAL_MODEL_NOTE


@pytest.mark.local
async def test_local_model_streams_an_answer_without_blocking_the_loop(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text("", encoding="utf-8")
    registry = ModelRegistry(load_model_config(config_file, env={}))
    assert registry.default_model_id() == "local:gemma3-270m"
    resolved = registry.resolve("local:gemma3-270m")
    assert isinstance(resolved.model, LocalModel) and resolved.context_window == 2048
    ticks = 0
    ticks_before_first_event: int | None = None

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    messages = [ModelRequest(parts=[UserPromptPart("The capital of France is")])]
    deltas = 0
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(ticker)
        async with resolved.model.request_stream(
            messages, {"max_tokens": 24, "temperature": 0.0}, ModelRequestParameters()
        ) as response:
            async for event in response:
                if ticks_before_first_event is None:
                    ticks_before_first_event = ticks
                if isinstance(event, PartDeltaEvent | PartStartEvent):
                    deltas += 1
        task_group.cancel_scope.cancel()
    answer = response.get()
    text = "".join(p.content for p in answer.parts if isinstance(p, TextPart))
    assert text.strip() and deltas >= 2
    assert 0 < answer.usage.output_tokens <= 24
    assert ticks_before_first_event is not None and ticks_before_first_event >= 1


@pytest.mark.local
async def test_abandoned_stream_frees_the_model_for_the_next_request() -> None:
    model = LocalModel()
    messages = [ModelRequest(parts=[UserPromptPart("Once upon a time")])]
    async with model.request_stream(
        messages, {"max_tokens": 200}, ModelRequestParameters()
    ) as response:
        async for _event in response:
            break  # leave after the first event: the worker thread must stop
    answer = await model.request(messages, {"max_tokens": 8}, ModelRequestParameters())
    assert any(isinstance(p, TextPart) and p.content for p in answer.parts)
