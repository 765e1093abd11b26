"""`scalebench plan --allocation-time`: predicted experiments packed in order into
allocations, with the run's margin, none split, each allocation holding its length less the
time limit's signal window, a requeue delay between allocations."""

from __future__ import annotations

import pytest

from scalebench.durations import LIMIT_SIGNAL_EARLY_S, LIMIT_SIGNAL_LEAD_S, TIME_MARGIN
from scalebench.planning.allocations import REQUEUE_DELAY_S, pack_allocations
from scalebench.planning.capacity.time_model import duration_text
from scalebench.planning.jobs import Job

# Of an allocation, the time its limit's signal may take: before it, the experiments.
WINDOW_S = LIMIT_SIGNAL_LEAD_S + LIMIT_SIGNAL_EARLY_S


def _job(identifier: str, predicted_s: float | None) -> Job:
    return Job(identifier, f"label {identifier}", {}, {}, 1, 1, 1, 0, 1, None, None, None, [],
               predicted_s=predicted_s)


def test_experiments_pack_in_order_with_the_margin_and_none_is_split():
    """Allocations holding 100 s before the signal window, experiments of 50, 30, 40 and
    20 s (60, 36, 48, 24 s with the margin): 60+36 fit, 48 does not fit the 4 s left and
    opens the second, 24 joins it."""
    jobs = [_job("a", 50), _job("b", 30), _job("c", 40), _job("d", 20)]
    allocations = pack_allocations(jobs, 100 + WINDOW_S)
    assert allocations.usable_s == 100
    assert allocations.packed == [["a", "b"], ["c", "d"]]
    assert allocations.count == 2 and allocations.too_long == []
    assert allocations.wall_s == pytest.approx(140 * TIME_MARGIN + REQUEUE_DELAY_S)


def test_an_experiment_longer_than_an_allocation_is_named_and_takes_one_of_its_own():
    allocations = pack_allocations([_job("a", 10), _job("long", 100), _job("b", 10)],
                                   60 + WINDOW_S)
    assert allocations.packed == [["a"], ["long"], ["b"]]
    line, = allocations.too_long
    assert line.startswith(f"job long (label long): predicted 100 s with a 20% margin is "
                           f"longer than the 60 s one allocation of "
                           f"{duration_text(60 + WINDOW_S)} holds before its time limit's "
                           f"signal")


def test_an_experiment_that_fits_the_limit_but_not_before_its_signal_is_too_long():
    """A 3-minute limit holds 90 s before the signal: a 60 s experiment (72 s with the
    margin) fits once per allocation, not twice, though two would fit the 180 s."""
    allocations = pack_allocations([_job("a", 60), _job("b", 60)], 180)
    assert allocations.packed == [["a"], ["b"]] and allocations.too_long == []
    assert pack_allocations([_job("a", 80)], 180).too_long


def test_uncalibrated_experiments_are_counted_apart_and_said():
    allocations = pack_allocations([_job("a", 10), _job("x", None)], 60 + WINDOW_S)
    assert allocations.packed == [["a"]] and allocations.uncalibrated == 1
    assert "1 uncalibrated experiment(s) not counted" in allocations.text()[0]
    assert allocations.to_json()["allocations"] == 1


def test_the_requeue_delay_comes_before_every_allocation_after_the_first():
    allocations = pack_allocations([_job(name, 50) for name in "abc"], 60 + WINDOW_S)
    assert allocations.count == 3
    assert allocations.wall_s == pytest.approx(150 * TIME_MARGIN + 2 * REQUEUE_DELAY_S)
