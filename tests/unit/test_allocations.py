"""`scalebench plan --allocation-time`: predicted experiments packed in order into
allocations, with the run's margin, none split, a requeue delay between allocations."""

from __future__ import annotations

import pytest

from scalebench.durations import TIME_MARGIN
from scalebench.planning.allocations import REQUEUE_DELAY_S, pack_allocations
from scalebench.planning.jobs import Job


def _job(identifier: str, predicted_s: float | None) -> Job:
    return Job(identifier, f"label {identifier}", {}, {}, 1, 1, 1, 0, 1, None, None, None, [],
               predicted_s=predicted_s)


def test_experiments_pack_in_order_with_the_margin_and_none_is_split():
    """100 s allocations, experiments of 50, 30, 40 and 20 s (60, 36, 48, 24 s with the
    margin): 60+36 fit, 48 does not fit the 4 s left and opens the second, 24 joins it."""
    jobs = [_job("a", 50), _job("b", 30), _job("c", 40), _job("d", 20)]
    allocations = pack_allocations(jobs, 100)
    assert allocations.packed == [["a", "b"], ["c", "d"]]
    assert allocations.count == 2 and allocations.too_long == []
    assert allocations.wall_s == pytest.approx(140 * TIME_MARGIN + REQUEUE_DELAY_S)


def test_an_experiment_longer_than_an_allocation_is_named_and_takes_one_of_its_own():
    allocations = pack_allocations([_job("a", 10), _job("long", 100), _job("b", 10)], 60)
    assert allocations.packed == [["a"], ["long"], ["b"]]
    line, = allocations.too_long
    assert line.startswith("job long (label long): predicted 100 s with a 20% margin is "
                           "longer than one allocation of 60 s")


def test_uncalibrated_experiments_are_counted_apart_and_said():
    allocations = pack_allocations([_job("a", 10), _job("x", None)], 60)
    assert allocations.packed == [["a"]] and allocations.uncalibrated == 1
    assert "1 uncalibrated experiment(s) not counted" in allocations.text()[0]
    assert allocations.to_json()["allocations"] == 1


def test_the_requeue_delay_comes_before_every_allocation_after_the_first():
    allocations = pack_allocations([_job(name, 50) for name in "abc"], 60)
    assert allocations.count == 3
    assert allocations.wall_s == pytest.approx(150 * TIME_MARGIN + 2 * REQUEUE_DELAY_S)
