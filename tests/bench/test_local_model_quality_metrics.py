"""The figures of ``bench/local_model_quality.py`` (its model runs only with the local extra)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "bench" / "local_model_quality.py"
_SPEC = importlib.util.spec_from_file_location("local_model_quality", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
_BENCH = importlib.util.module_from_spec(_SPEC)
sys.modules["local_model_quality"] = _BENCH
_SPEC.loader.exec_module(_BENCH)
PROMPTS, echoes_question, repeats_a_line = (
    _BENCH.PROMPTS,
    _BENCH.echoes_question,
    _BENCH.repeats_a_line,
)


def test_twenty_distinct_prompts() -> None:
    assert len(PROMPTS) == 20 and len(set(PROMPTS)) == 20


def test_an_answer_repeats_a_line_when_a_line_comes_twice_or_is_the_question() -> None:
    question = "What is the capital of France?"
    assert repeats_a_line(question, "Paris.\nIt is big.\nparis")
    assert repeats_a_line(question, "what is the capital of France\nParis")
    assert not repeats_a_line(question, "Paris is the capital of France.\nIt is big.")
    assert not repeats_a_line(question, "")


def test_an_answer_echoes_the_question_when_it_contains_its_words_in_order() -> None:
    question = "What is the capital of France?"
    assert echoes_question(question, "Q: What is the capital of France? A: Paris")
    assert not echoes_question(question, "The capital of France is Paris.")
