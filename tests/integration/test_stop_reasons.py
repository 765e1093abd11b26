"""How a run ended, through `scalebench run` as a user launches it: a huge gradient step
diverges, a time limit shorter than the run cuts it (each on its rows, in the run status and in
the closing line), and a signal stops the experiment in flight, which the run status names
beside the complete one before it (a run reaching max_iter: also test_end_to_end)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from provenance.check import check_results
from provenance.stop_reasons import (
    COMPLETE,
    DIVERGED,
    ITERATION_COLUMN,
    REASON_COLUMN,
    STOPPED,
    TIME_LIMIT,
    record_stops,
)
from scalebench.results.store import run_status
from tests.support.cli import copy_benchmark, run_cli, tiny_experiment
from tests.support.paths import REPO


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


def test_a_huge_gradient_step_diverges_and_says_so(benchmark, write_config):
    experiment = tiny_experiment(solver=[
        {"pnp": {"max_iter": 30, "device": "cpu", "step_size": 1.0e9}}])
    result = run_cli("run", write_config(experiment), "--benchmark", benchmark,
                     "--output", "ends", "--no-html")
    assert result.returncode == 0, result.stderr[-2000:]
    parquet = benchmark / "outputs" / "ends.parquet"
    (reason, iteration), = _ends(parquet).values()
    record = run_status(parquet)
    stop, = record_stops(record).values()
    assert (stop.reason, stop.iteration, stop.max_iter) == (DIVERGED, iteration, 30) == \
        (reason, iteration, 30)
    assert iteration < 30 and record["status"] == "complete"
    assert f"stopped early: 1 experiment diverged: pnp on tomography_2d at iteration " \
           f"{iteration} of 30" in result.stdout
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
    assert f"at iteration {iteration} of 20000 (timeout 1 s, " in result.stdout
    # no time model: the limit that would do is its measured iterations' extrapolated
    assert "would do: its measured " in result.stdout and "no prediction made)" in result.stdout


def _predicted_config(tmp_path, monkeypatch, write_config):
    """A 32² CT of 4 iterations whose (written) calibration predicts a few seconds, and a
    timeout of a millisecond: the operator norm alone outlasts it."""
    from scalebench.planning.capacity.configuration import Configuration
    from tests.support.plans import timed_calibration

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    experiment = tiny_experiment(solver=[{"pnp": {"max_iter": 4, "device": "cpu"}}],
                                 timeout=0.001)
    (dataset, dataset_params), = experiment["dataset"][0].items()
    timed_calibration(Configuration(dataset, dataset_params, "pnp",
                                    experiment["solver"][0]["pnp"], "image_size"))
    return write_config(experiment)


def test_run_with_strict_refuses_a_timeout_below_the_prediction_and_writes_nothing(
        benchmark, tmp_path, monkeypatch, write_config):
    config = _predicted_config(tmp_path, monkeypatch, write_config)
    result = run_cli("run", config, "--benchmark", benchmark, "--output", "strict", "--strict")
    assert result.returncode == 2, result.stderr[-2000:]
    line, = result.stderr.splitlines()
    assert line.startswith("scalebench: error: experiment ") and \
        "time limit 0.001 s is below its predicted " in line and \
        "with a 20% margin: set the run option timeout to at least " in line
    assert "[scalebench] experiment" not in result.stdout  # no rank started
    assert not (benchmark / "outputs").exists()


def test_run_warns_before_it_starts_and_a_run_cut_before_its_first_iteration_says_so(
        benchmark, tmp_path, monkeypatch, write_config):
    """plan's warning, then the run: its time limit runs out in the set-up, so only the
    initial estimate (iteration 0) is recorded; it reads as cut, not complete, and its
    closing line names the timeout plan's prediction asks for."""
    config = _predicted_config(tmp_path, monkeypatch, write_config)
    result = subprocess.run([sys.executable, "-m", "scalebench", "run", str(config),
                             "--benchmark", str(benchmark), "--output", "cut0", "--no-html"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    lines = result.stdout.splitlines()
    warning, = [i for i, line in enumerate(lines) if line.startswith("scalebench: warning: ")]
    started = next(i for i, line in enumerate(lines) if line.startswith("[scalebench] experi"))
    assert warning < started
    advised = int(lines[warning].rsplit("at least ", 1)[1].removesuffix("s"))
    parquet = benchmark / "outputs" / "cut0.parquet"
    assert list(_ends(parquet).values()) == [(TIME_LIMIT, 0)]
    stop, = record_stops(run_status(parquet)).values()
    assert (stop.reason, stop.iteration, stop.max_iter) == (TIME_LIMIT, 0, 4)
    cut, = [line for line in lines if line.startswith("stopped early: ")]
    assert cut.startswith("stopped early: 1 experiment cut by its time limit: ")
    assert f"at iteration 0 of 4 (timeout 0.001 s, {advised} s would do: plan's prediction " \
           in cut


def test_a_signal_names_the_experiment_in_flight_stopped_beside_the_finished_one(
        benchmark, write_config):
    experiment = tiny_experiment(solver=[{"pnp": {"max_iter": 1, "device": "cpu"}},
                                         {"pnp": {"max_iter": 400, "device": "cpu"}}],
                                 **{"max-runs": 1000})
    launcher = subprocess.Popen(
        [sys.executable, "-m", "scalebench", "run", str(write_config(experiment)),
         "--benchmark", str(benchmark), "--output", "s", "--no-html"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    parquet, deadline = benchmark / "outputs" / "s.parquet", time.monotonic() + 300
    # the first experiment published, the second one's rank 0 past an iteration
    while time.monotonic() < deadline and not (parquet.exists() and any(
            "iteration " in log.read_text()
            for log in (benchmark / "outputs").glob(".staging-*/*/rank0.log"))):
        time.sleep(0.1)
    launcher.send_signal(signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    record = run_status(parquet)
    assert record["status"] == "partial"
    stops = record_stops(record)
    (finished, complete), = [(k, s) for k, s in stops.items() if k in record["experiments"]]
    assert (complete.reason, complete.iteration, complete.max_iter) == (COMPLETE, 1, 1)
    stopped, = [s for k, s in stops.items() if k != finished]
    assert stopped.reason == STOPPED and stopped.max_iter == 400
    assert stopped.iteration is not None and 0 <= stopped.iteration < 400
    assert _ends(parquet) == {finished: (COMPLETE, 1)}  # the stopped one kept no rows
