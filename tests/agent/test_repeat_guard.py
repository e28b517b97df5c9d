"""``RepeatGuard``: loops on a line or on the question are cut; ordinary text streams as is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drupe.agent.models.repeat_guard import RepeatGuard


def run(guard: RepeatGuard, deltas: list[str]) -> tuple[str, bool]:
    out: list[str] = []
    stopped = False
    for delta in deltas:
        text, stopped = guard.feed(delta)
        out.append(text)
        if stopped:
            break
    if not stopped:
        out.append(guard.finish())
    return "".join(out), stopped


def tokens(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_the_question_repeated_over_and_over_is_cut() -> None:
    question = "What is the capital of France?"
    looping = "What is the capital of France?\n" * 8 + "Paris"
    text, stopped = run(RepeatGuard(question=question), tokens(looping))
    assert stopped and text == ""


def test_an_echoed_question_is_dropped_and_the_answer_kept() -> None:
    question = "What is the capital of France?"
    answer = "What is the capital of France? The capital of France is Paris."
    text, stopped = run(RepeatGuard(question=question), tokens(answer))
    assert not stopped and text == "The capital of France is Paris."


def test_a_repeated_line_loop_stops_after_the_first_pass() -> None:
    loop = "The sky is blue today.\nThe grass is green today.\n" * 4
    text, stopped = run(RepeatGuard(question="colours?"), tokens(loop, 5))
    assert stopped
    assert text == "The sky is blue today.\nThe grass is green today.\n"


def test_short_repeats_are_not_loops() -> None:
    answer = "Yes. Yes. It is. It is."
    text, stopped = run(RepeatGuard(question="Is it?"), tokens(answer, 2))
    assert (text, stopped) == (answer, False)


def test_text_that_only_starts_like_the_question_is_released_when_it_diverges() -> None:
    guard = RepeatGuard(question="What is the capital of France?")
    assert guard.feed("What is the") == ("", False)  # could be the question again: held
    assert guard.feed(" best way") == ("What is the best way", False)
    assert guard.feed(" to go") == (" to go", False)


@given(st.lists(st.sampled_from(["alpha ", "beta ", "gamma ", "delta ", "\n", ". ", "42 "])))
def test_text_without_repeated_segments_passes_unchanged(pieces: list[str]) -> None:
    # Build a text whose every segment is unique: number each piece.
    text = "".join(f"{piece.strip() or 'x'}{n} " for n, piece in enumerate(pieces))
    out, stopped = run(RepeatGuard(question="unrelated question here?"), tokens(text, 4))
    assert (out, stopped) == (text, False)
