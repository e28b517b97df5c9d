"""The local model's prompts: a conversation as Gemma chat turns or a few-shot Q/A prompt.

Owns: ``to_qa_prompt`` (the system text, ``QA_PREAMBLE``, then the turns as ``Question:`` /
``Answer:`` lines, ending with ``Answer:``), ``to_chat_messages`` (plain ``user`` / ``assistant``
turns for llama.cpp's Gemma template, system text leading the first user turn),
``last_question`` and ``prompt_words`` (the rough input token count), for
``drupe.agent.models.local``.

Rules: Gemma has no system or tool role, so tool calls and results are written out as text;
the oldest turns are dropped first once the prompt passes its character budget (the context
is 2,048 tokens); the first turn is a user turn. Pure: no I/O, no llama.cpp.
"""

from __future__ import annotations

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = [
    "QA_PREAMBLE",
    "TURN_MARKERS",
    "last_question",
    "prompt_words",
    "to_chat_messages",
    "to_qa_prompt",
]

#: rough budget for the prompt (characters), leaving room in the 2,048-token context to answer
_PROMPT_CHAR_BUDGET = 4000

#: Shown to the base model before the conversation: two answered questions set the format.
QA_PREAMBLE = (
    "Below, a helpful assistant answers each question in one or two short, correct sentences.\n\n"
    "Question: What is the capital of Italy?\n"
    "Answer: The capital of Italy is Rome.\n\n"
    "Question: How many legs does a spider have?\n"
    "Answer: A spider has eight legs.\n\n"
)
TURN_MARKERS = ("<end_of_turn>", "<start_of_turn>")


def _conversation(messages: list[ModelMessage]) -> tuple[list[str], list[dict[str, str]]]:
    """The system texts, and the ``user``/``assistant`` turns that fit the prompt budget.

    Tool calls and results are written out as text; the oldest turns are dropped first; the
    first turn is a user turn (empty if need be).
    """
    system: list[str] = []
    turns: list[dict[str, str]] = []

    def add(role: str, text: str) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})

    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    system.append(part.content)
                elif isinstance(part, UserPromptPart):
                    content = part.content
                    text = (
                        content
                        if isinstance(content, str)
                        else " ".join(item for item in content if isinstance(item, str))
                    )
                    add("user", text)
                elif isinstance(part, ToolReturnPart):
                    add("user", f"Result of {part.tool_name}: {part.model_response_str()}")
                elif isinstance(part, RetryPromptPart):
                    add("user", part.model_response())
        else:
            for response_part in message.parts:
                if isinstance(response_part, TextPart):
                    add("assistant", response_part.content)
                elif isinstance(response_part, ToolCallPart):
                    add("assistant", f"(calls {response_part.tool_name})")
    last_request = next((m for m in reversed(messages) if isinstance(m, ModelRequest)), None)
    if last_request is not None and last_request.instructions:
        system.append(last_request.instructions)
    while len(turns) > 1 and sum(len(t["content"]) for t in turns) > _PROMPT_CHAR_BUDGET:
        turns.pop(0)
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": ""})
    return system, turns


def to_chat_messages(messages: list[ModelMessage]) -> list[dict[str, str]]:
    """Render pydantic-ai messages as plain ``user``/``assistant`` turns for the Gemma template.

    Gemma's template has no system or tool role: system text and instructions lead the first
    user turn, and tool calls and results are written out as text. Oldest turns are dropped
    first when the prompt would not fit the context.
    """
    system, turns = _conversation(messages)
    if system and turns:
        turns[0]["content"] = "\n\n".join([*system, turns[0]["content"]]).strip()
    elif system:
        turns.append({"role": "user", "content": "\n\n".join(system)})
    return turns


def to_qa_prompt(messages: list[ModelMessage]) -> str:
    """A few-shot completion prompt: the system text, :data:`QA_PREAMBLE`, then the turns as
    ``Question:``/``Answer:`` lines (each on one line). It ends with ``Answer:``."""
    system, turns = _conversation(messages)
    head = "".join(f"{' '.join(text.split())}\n\n" for text in system if text.strip())
    lines: list[str] = []
    for turn in turns:
        text = " ".join(turn["content"].split())
        if turn["role"] == "user":
            if text:
                lines.append(f"Question: {text}\n")
        else:
            lines.append(f"Answer: {text}\n\n")
    return head + QA_PREAMBLE + "".join(lines) + "Answer:"


def prompt_words(prompt: str | list[dict[str, str]]) -> int:
    """A rough input token count: the words of the prompt."""
    if isinstance(prompt, str):
        return len(prompt.split())
    return sum(len(t["content"].split()) for t in prompt)


def last_question(messages: list[ModelMessage]) -> str:
    """The text of the last user turn (the repeat guard drops an echo of it)."""
    _system, turns = _conversation(messages)
    return next((t["content"] for t in reversed(turns) if t["role"] == "user"), "")
