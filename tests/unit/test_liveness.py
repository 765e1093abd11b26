"""Liveness (scalebench.launch.liveness): the bounds that make a rank hung, the heartbeat a
rank writes, the launcher's reading of it, and a hung rank's step stopped at once."""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

from scalebench.errors import ScalebenchError
from scalebench.launch import liveness, processes, progress
from scalebench.launch.liveness import (
    COLLECTIVE_TIMEOUT_VARIABLE,
    HEARTBEAT_VARIABLE,
    SILENCE_VARIABLE,
    Bounds,
    Hung,
    RankLife,
    Watch,
    judge,
)
from scalebench.launch.processes import RankGroup
from scalebench.planning import plan_time
from scalebench.planning.capacity.time_model import RunPrediction

PREDICTED = {"longest_phase_s": 30.0, "run_s": 100.0}


def test_the_default_bounds_are_a_minute_of_silence_and_a_beat_every_5_s():
    assert liveness.silence_bound_s({}) == 60.0
    assert liveness.heartbeat_interval_s({}) == 5.0  # the issue asks for 10 s at most
    assert liveness.silence_bound_s({SILENCE_VARIABLE: "5"}) == 5.0
    assert liveness.heartbeat_interval_s({SILENCE_VARIABLE: "6"}) == 0.5


@pytest.mark.parametrize("value", ["x", "0", "-3", "nan", "inf", "3 fortnights"])
def test_a_silence_bound_that_is_not_a_positive_duration_is_refused_in_one_line(value):
    with pytest.raises(ScalebenchError) as raised:
        liveness.silence_bound_s({SILENCE_VARIABLE: value})
    assert str(raised.value).startswith(f"{SILENCE_VARIABLE}: {value!r} is not a positive "
                                        f"duration (give ")
    assert "\n" not in str(raised.value)


def test_a_silence_bound_takes_every_duration_form():
    assert liveness.silence_bound_s({SILENCE_VARIABLE: "2min"}) == 120.0


@pytest.mark.parametrize(("longest", "bound"), [(None, None), (0.5, 60.0), (12.0, 60.0),
                                                (30.0, 150.0), (600.0, 3000.0)])
def test_the_stall_bound_is_five_longest_phases_and_at_least_a_minute(longest, bound):
    assert liveness.stall_bound_s(longest) == bound


def test_an_experiments_bounds_come_from_its_predicted_longest_phase():
    assert Bounds.of({"predicted": PREDICTED}, {}) == Bounds(60.0, 150.0)
    assert Bounds.of({"predicted": None}, {SILENCE_VARIABLE: "5"}) == Bounds(5.0, None)
    assert Bounds.of({}, {}) == Bounds(60.0, None)  # an expand of an older child


def test_the_collective_timeout_follows_the_stall_bound_only_where_predicted():
    assert liveness.rank_variables(Bounds(60.0, 150.0), {}) == \
        {COLLECTIVE_TIMEOUT_VARIABLE: "180"}  # after the launcher's own verdict
    assert liveness.rank_variables(Bounds(60.0, None), {}) == {}  # the process group's default
    assert liveness.rank_variables(Bounds(60.0, 150.0),
                                   {COLLECTIVE_TIMEOUT_VARIABLE: "900"}) == {}  # the user's


def test_the_longest_phase_counts_start_up_set_up_norm_and_an_iteration(monkeypatch):
    run = RunPrediction(startup_s=4.0, setup_s=9.0, norm_s=20.0, iteration_s=1.5,
                        evaluation_s=0.5, iterations=100, evaluations=10, extrapolation=1.0)
    monkeypatch.setattr(plan_time, "experiment_run", lambda experiment, ranks: run)
    monkeypatch.setattr(plan_time, "computes_norm", lambda experiment, normed: True)
    experiment = {"dataset": {"tomography_2d": {}}, "solver": {"pnp": {}}}
    one_run = 4.0 + 9.0 + 20.0 + 150.0 + 5.0
    assert plan_time.experiment_prediction(experiment, 2, 3, set()) == \
        {"longest_phase_s": 20.0, "run_s": one_run,
         "experiment_s": one_run + 2 * (9.0 + 150.0 + 5.0), "computes_norm": True}
    # the norm read from the cache: no norm phase, in no run
    monkeypatch.setattr(plan_time, "computes_norm", lambda experiment, normed: False)
    cached = plan_time.experiment_prediction(experiment, 2, 1, set())
    assert cached["longest_phase_s"] == 9.0 and cached["run_s"] == one_run - 20.0
    slow_start = RunPrediction(70.0, 9.0, 0.0, 1.5, 0.5, 100, 10, 1.0)
    monkeypatch.setattr(plan_time, "experiment_run", lambda experiment, ranks: slow_start)
    assert plan_time.experiment_prediction(experiment, 2, 1, set())["longest_phase_s"] == 70.0
    monkeypatch.setattr(plan_time, "experiment_run", lambda experiment, ranks: None)
    assert plan_time.experiment_prediction(experiment, 2, 1, set()) is None  # not calibrated


def life(rank: int, beat_at: float, progress_at: float) -> RankLife:
    return RankLife(rank, f"node{rank}", beat_at, progress_at)


def test_the_rank_silent_longest_beyond_the_bound_is_hung():
    bounds = Bounds(60.0, None)
    assert judge([life(0, 100.0, 0.0), life(1, 45.0, 0.0)], bounds, 104.0) is None
    found = judge([life(0, 30.0, 0.0), life(1, 20.0, 0.0), life(2, 100.0, 0.0)], bounds, 100.0)
    assert found == Hung(1, "node1", "no heartbeat for 80 s (stopped, or its node frozen)")
    assert found.text() == "rank 1 on node1 is hung: no heartbeat for 80 s (stopped, or its " \
                           "node frozen)"


def test_a_stall_is_hung_only_with_a_prediction_and_every_heartbeat_on_time():
    ranks = [life(0, 199.0, 40.0), life(1, 198.0, 20.0)]
    assert judge(ranks, Bounds(60.0, None), 200.0) is None  # uncalibrated: silence only
    assert judge(ranks, Bounds(60.0, 190.0), 200.0) is None  # within the bound
    assert judge(ranks, Bounds(60.0, 150.0), 200.0) == Hung(
        1, "node1", "no progress for 180 s (bound 150 s: 5 x its longest predicted phase)")
    # rank 1 is 20 s late (3 beats and more): its peer stalls waiting for it, and only the
    # silence rule may decide
    late = [life(0, 199.0, 40.0), life(1, 180.0, 150.0)]
    assert judge(late, Bounds(60.0, 150.0), 200.0) is None


def test_the_launcher_times_each_ranks_heartbeat_by_its_own_clock(tmp_path):
    watch = Watch(tmp_path, Bounds(10.0, None))
    assert watch.verdict(0.0) is None and watch.ranks == {}  # no rank started yet
    (tmp_path / "rank1.started").write_text(json.dumps({"rank": 1, "host": "n2", "pid": 7}))
    assert watch.verdict(1.0) is None and watch.ranks[1].beat_at == 1.0
    assert watch.verdict(1.5) is None  # read at most once a second
    assert watch.verdict(10.0) is None  # not beating yet: silent since its start was seen
    (tmp_path / "rank1.alive").write_text(json.dumps({"beat": 0, "progress": 0}))
    assert watch.verdict(11.5) is None and watch.ranks[1].beat_at == 11.5
    (tmp_path / "rank1.alive").write_text(json.dumps({"beat": 1, "progress": 0}))
    assert watch.verdict(15.0) is None
    assert (watch.ranks[1].beat_at, watch.ranks[1].progress_at) == (15.0, 11.5)
    (tmp_path / "rank1.alive").write_text("")  # read while rewritten: alive all the same
    assert watch.verdict(20.0) is None and watch.ranks[1].beat_at == 20.0
    assert watch.verdict(31.0) == Hung(1, "n2",
                                       "no heartbeat for 11 s (stopped, or its node frozen)")
    (tmp_path / "rank1.started").unlink()  # it reported its end
    assert watch.verdict(60.0) is None and watch.ranks == {}


def test_a_rank_that_reported_its_end_is_not_followed_while_its_start_note_lingers(tmp_path):
    """A shared file system's listing may hold the removed start note a while: the heartbeat
    file's end mark, read at once, ends the following."""
    watch = Watch(tmp_path, Bounds(10.0, None))
    (tmp_path / "rank0.started").write_text(json.dumps({"rank": 0, "host": "n1", "pid": 7}))
    (tmp_path / "rank0.alive").write_text(json.dumps({"beat": 0, "progress": 3}))
    assert watch.verdict(0.0) is None and 0 in watch.ranks
    liveness.mark_ended(liveness.heartbeat_path(tmp_path, 0))
    assert watch.verdict(1.0) is None and watch.ranks == {}
    assert watch.verdict(30.0) is None and watch.ranks == {}  # the note still listed


def test_a_heartbeat_carries_the_progress_the_process_reports(tmp_path, monkeypatch):
    path = tmp_path / "rank0.alive"
    stop = threading.Event()
    monkeypatch.setattr(progress, "_reports_made", 0)
    thread = liveness.start_heartbeat({HEARTBEAT_VARIABLE: str(path), SILENCE_VARIABLE: "0.6"},
                                      stop)
    try:
        beats = []
        deadline = time.monotonic() + 10
        while len({b["beat"] for b in beats}) < 3 and time.monotonic() < deadline:
            if path.is_file() and path.read_text():
                beats.append(json.loads(path.read_text()))
            time.sleep(0.01)
        assert len({b["beat"] for b in beats}) >= 3 and beats[0]["progress"] == 0
        monkeypatch.setattr(progress, "_reports_made", 4)
        time.sleep(0.3)
        assert json.loads(path.read_text())["progress"] == 4
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert liveness.start_heartbeat({}) is None  # a plain benchopt run beats nowhere


class Stopped:
    """A rank process stopped with SIGSTOP: it ends only when killed."""

    pid = 4242

    def __init__(self) -> None:
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


def test_a_hung_rank_is_named_and_its_step_stopped_at_once(tmp_path, monkeypatch, capsys):
    stopped, sent = Stopped(), []

    def killpg(_pid: int, signum: int) -> None:
        sent.append(signum)
        if signum == signal.SIGKILL:
            stopped.returncode = -signal.SIGKILL

    monkeypatch.setattr(processes.os, "killpg", killpg)
    monkeypatch.setattr(processes, "POLL_S", 0.01)
    monkeypatch.setattr(liveness, "READ_INTERVAL_S", 0.01)
    (tmp_path / "rank0.started").write_text(json.dumps({"rank": 0, "host": "n1", "pid": 1}))
    group = RankGroup([stopped], grace_s=0.05, watch=Watch(tmp_path, Bounds(0.1, None)))
    assert group.wait() == [-signal.SIGKILL]
    assert sent == [signal.SIGTERM, signal.SIGCONT, signal.SIGKILL] and group.forced
    assert group.hung is not None and (group.hung.rank, group.hung.host) == (0, "n1")
    assert capsys.readouterr().err.startswith("[scalebench] rank 0 on n1 is hung: no "
                                              "heartbeat for ")


def test_expand_gives_the_launcher_each_experiments_predicted_times(tmp_path, monkeypatch,
                                                                    capsys):
    """A calibrated configuration's experiment carries its numbers (the longest phase: the
    2 s start, against 1 s of set-up and 0.5 s of operator norm); an uncalibrated one
    null."""
    from scalebench.launch import children
    from scalebench.planning.capacity.configuration import Configuration
    from tests.support.plans import config_file
    from tests.unit.test_plan import timed_calibration

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    dataset = {"image_size": 64, "num_angles": 32}
    solvers = [{"max_iter": 10, "device": "cpu", "denoiser": "tv", "step_size": step}
               for step in (0.1, 0.2)]
    timed_calibration(Configuration("tomography_2d", dataset, "pnp", solvers[0], "image_size"))
    config = config_file(tmp_path, dataset=[{"tomography_2d": dataset}],
                         solver=[{"pnp": {**solvers[0], "step_size": [0.1, 0.2]}}])
    assert children.main(["expand", str(config), "--folder", str(tmp_path / "e")]) == 0
    calibrated, uncalibrated = json.loads(capsys.readouterr().out)
    assert calibrated["predicted"]["longest_phase_s"] == pytest.approx(2.0)
    assert calibrated["predicted"]["run_s"] == pytest.approx(
        2.0 + 1.5 + 10 * 1e-6 * 64**2 + 11 * 0.1)  # start, set-up with the norm, ...
    assert uncalibrated["predicted"] is None
    assert Bounds.of(calibrated, {}) == Bounds(60.0, 60.0)
