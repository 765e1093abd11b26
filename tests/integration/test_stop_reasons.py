"""How a run ended, through `scalebench run` as a user launches it: a run that reaches its
max_iter is complete, a huge gradient step diverges, and a time limit shorter than the run
cuts it; each on its rows, in the run status and in the closing line."""

from __future__ import annotations

import pandas as pd
import pytest

from provenance.check import check_results
from provenance.stop_reasons import (
    COMPLETE,
    DIVERGED,
    ITERATION_COLUMN,
    REASON_COLUMN,
    TIME_LIMIT,
    record_stops,
)
from scalebench.results.store import run_status
from tests.support.cli import copy_benchmark, run_cli, tiny_experiment


@pytest.fixture
def benchmark(tmp_path):
    return copy_benchmark(tmp_path)


def _ends(parquet) -> dict[str, tuple[str, int]]:
    """Per experiment: the one (reason, iteration) all its rows carry."""
    rows = pd.read_parquet(parquet)
    ends = {}
    for experiment, part in rows.groupby("experiment_id"):
        marks = set(zip(part[REASON_COLUMN], part[ITERATION_COLUMN], strict=True))
        assert len(marks) == 1, marks
        (reason, iteration), = marks
        assert iteration == part["stop_val"].max()
        ends[experiment] = (reason, int(iteration))
    return ends


def test_a_run_to_max_iter_is_complete_and_a_huge_step_diverged(benchmark, write_config):
    experiment = tiny_experiment(solver=[
        {"pnp": {"max_iter": 3, "device": "cpu"}},
        {"pnp": {"max_iter": 30, "device": "cpu", "step_size": 1.0e9}}])
    result = run_cli("run", write_config(experiment), "--benchmark", benchmark,
                     "--output", "ends", "--no-html")
    assert result.returncode == 0, result.stderr[-2000:]
    parquet = benchmark / "outputs" / "ends.parquet"
    ends = _ends(parquet)
    assert sorted(reason for reason, _ in ends.values()) == [COMPLETE, DIVERGED]
    record = run_status(parquet)
    assert record["status"] == "complete"
    stops = record_stops(record)
    assert {key: (stop.reason, stop.iteration) for key, stop in stops.items()} == ends
    diverged, = [stop for stop in stops.values() if stop.reason == DIVERGED]
    assert diverged.iteration < diverged.max_iter == 30
    assert f"1 experiment diverged: pnp step_size=1000000000.0 x tomography_2d at iteration " \
           f"{diverged.iteration} of 30" in result.stdout
    assert check_results(parquet)[1] == []


def test_a_time_limit_shorter_than_the_run_cuts_it_and_says_so(benchmark, write_config):
    """Evaluated every iteration, 20000 iterations cannot end within a second: benchopt's
    timeout stops the run at its first evaluation past the second."""
    experiment = tiny_experiment(solver=[{"pnp": {"max_iter": 20000, "device": "cpu"}}],
                                 timeout=1, **{"max-runs": 20001})
    result = run_cli("run", write_config(experiment), "--benchmark", benchmark,
                     "--output", "cut", "--no-html")
    assert result.returncode == 0, result.stderr[-2000:]
    parquet = benchmark / "outputs" / "cut.parquet"
    (reason, iteration), = _ends(parquet).values()
    assert reason == TIME_LIMIT and iteration < 20000
    record = run_status(parquet)
    stop, = record_stops(record).values()
    assert (stop.reason, stop.iteration, stop.max_iter) == (TIME_LIMIT, iteration, 20000)
    assert record["status"] == "complete"  # every experiment ran; the stop says how far
    assert "stopped early: 1 experiment cut by its time limit: " in result.stdout
    assert f"at iteration {iteration} of 20000" in result.stdout
