"""When a live answer's checkpoint is due: the policy and the checkpointer's queues, driven
with explicit times (no task runs; ``take_due`` is the writer's step)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from drupe.streaming.checkpoints import Checkpointer, CheckpointPolicy


class _Sink:
    async def write_checkpoints(self, batch: Sequence[tuple[str, str]]) -> int:
        return len(batch)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _checkpointer(**policy: float) -> tuple[Checkpointer, _Clock]:
    clock = _Clock()
    return Checkpointer(CheckpointPolicy(**policy), clock=clock), clock  # type: ignore[arg-type]


def test_a_small_change_is_due_after_the_interval_and_not_before() -> None:
    checkpointer, clock = _checkpointer(interval=1.0, min_bytes=512, max_loss=0.02, coalesce=0)
    track = checkpointer.track("row", _Sink(), lambda: "[]")
    checkpointer.changed(track, 40)
    clock.now += 0.5
    checkpointer.changed(track, 40)  # later changes keep the first change's deadline
    assert checkpointer.take_due(clock.now) == []
    clock.now += 0.49
    assert checkpointer.take_due(clock.now) == []
    clock.now += 0.01
    assert checkpointer.take_due(clock.now) == [track]


def test_max_bytes_make_a_checkpoint_due_at_once() -> None:
    checkpointer, clock = _checkpointer(
        interval=1.0, max_bytes=16_384, max_loss=0.5, min_bytes=10**9
    )
    track = checkpointer.track("row", _Sink(), lambda: "[]")
    checkpointer.changed(track, 16_383)
    assert checkpointer.take_due(clock.now) == []
    checkpointer.changed(track, 1)
    assert checkpointer.take_due(clock.now) == [track]


def test_unsaved_bytes_above_the_loss_fraction_make_a_checkpoint_due_at_once() -> None:
    checkpointer, clock = _checkpointer(interval=1.0, max_loss=0.02, min_bytes=100)
    track = checkpointer.track("row", _Sink(), lambda: "[]")
    checkpointer.changed(track, 99)  # below min_bytes: waits for the interval
    assert checkpointer.take_due(clock.now) == []
    checkpointer.changed(track, 1)  # 100 unsaved of 100: due
    assert checkpointer.take_due(clock.now) == [track]
    checkpointer.mark_serialized(track)  # the writer saved it
    checkpointer.changed(track, 10_000)  # 10,000 unsaved of 10,100: due
    clock.now += 0.001
    assert checkpointer.take_due(clock.now) == [track]


def test_loss_fraction_is_measured_against_the_whole_message() -> None:
    checkpointer, clock = _checkpointer(interval=1.0, max_loss=0.02, min_bytes=100)
    track = checkpointer.track("row", _Sink(), lambda: "[]")
    checkpointer.changed(track, 100_000)  # a long message...
    assert checkpointer.take_due(clock.now) == [track]
    checkpointer.mark_serialized(track)  # ...already saved
    checkpointer.changed(track, 1_999)  # under 2 % of 101,999
    assert checkpointer.take_due(clock.now) == []
    checkpointer.changed(track, 100)  # 2,099 of 102,099: over 2 %
    assert checkpointer.take_due(clock.now) == [track]


def test_an_unchanged_answer_is_never_checkpointed_again() -> None:
    checkpointer, clock = _checkpointer(interval=1.0)
    track = checkpointer.track("row", _Sink(), lambda: "[]")
    checkpointer.changed(track, 10)
    clock.now += 1.0
    assert checkpointer.take_due(clock.now) == [track]
    checkpointer.mark_serialized(track)  # what the writer does once it serialized the message
    clock.now += 60.0
    assert checkpointer.take_due(clock.now) == []


def test_a_closed_track_is_not_checkpointed() -> None:
    checkpointer, clock = _checkpointer(interval=1.0, min_bytes=1, max_loss=0.0)
    track = checkpointer.track("row", _Sink(), lambda: "[]")
    checkpointer.changed(track, 10)
    checkpointer.close(track)
    clock.now += 5.0
    assert checkpointer.take_due(clock.now) == []
    checkpointer.changed(track, 10)
    assert checkpointer.take_due(clock.now) == []


def test_changes_due_soon_join_the_batch_of_a_due_one() -> None:
    checkpointer, clock = _checkpointer(interval=1.0, coalesce=0.25)
    first = checkpointer.track("first", _Sink(), lambda: "[]")
    soon = checkpointer.track("soon", _Sink(), lambda: "[]")
    later = checkpointer.track("later", _Sink(), lambda: "[]")
    checkpointer.changed(first, 10)
    clock.now += 0.2
    checkpointer.changed(soon, 10)
    clock.now += 0.1
    checkpointer.changed(later, 10)
    clock.now += 0.7  # first: 1.0 s old; soon: 0.8 s (within 25 %); later: 0.7 s
    assert checkpointer.take_due(clock.now) == [first, soon]


def test_threshold_matches_the_byte_rule() -> None:
    policy = CheckpointPolicy(max_bytes=16_384, min_bytes=512, max_loss=0.02)
    for saved in (0, 100, 10_000, 25_088, 50_000, 10**6):
        threshold = policy.threshold(saved)
        assert policy.due_by_bytes(threshold, saved + threshold)
        assert threshold == 1 or not policy.due_by_bytes(threshold - 1, saved + threshold - 1)


def test_a_batch_holds_at_most_max_batch_rows_and_the_rest_stay_queued() -> None:
    checkpointer, clock = _checkpointer(interval=1.0, max_batch=3)
    tracks = [checkpointer.track(f"row{i}", _Sink(), lambda: "[]") for i in range(5)]
    for track in tracks:
        checkpointer.changed(track, 10)
    clock.now += 1.0
    assert checkpointer.take_due(clock.now) == tracks[:3]
    assert checkpointer.take_due(clock.now) == tracks[3:]


@pytest.mark.parametrize(
    "bad",
    [
        {"max_bytes": 0},
        {"min_bytes": 0},
        {"max_loss": 1.0},
        {"max_loss": -0.1},
        {"write_timeout": 0},
        {"max_batch": 0},
        {"coalesce": 1.5},
    ],
)
def test_policy_limits_are_explicit(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CheckpointPolicy(**bad)  # type: ignore[arg-type]


def test_a_zero_interval_turns_checkpoints_off() -> None:
    assert not CheckpointPolicy(interval=0).enabled
    assert CheckpointPolicy().enabled
