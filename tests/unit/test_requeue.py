"""Self-requeue under SLURM (scalebench.launch.requeue), its SLURM client calls fed canned
replies: the restart limit, the exclusion set once the job is pending, no node left, requeue
refused, a start on an excluded node, and the time an experiment needs against the job's."""

from __future__ import annotations

import json
import signal
from datetime import datetime
from pathlib import Path

import pytest

from scalebench.durations import LIMIT_SIGNAL_EARLY_S, LIMIT_SIGNAL_LEAD_S
from scalebench.errors import ScalebenchError
from scalebench.launch import requeue
from scalebench.launch.requeue import Cut, Requeues, read_requeues, write_requeues

# Of the time a job has left, what its time limit's signal may take.
WINDOW_S = LIMIT_SIGNAL_LEAD_S + LIMIT_SIGNAL_EARLY_S
JOB = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2",
       "SLURM_JOB_PARTITION": "debug"}


class Slurm:
    """Canned replies per command word (``scontrol requeue``...), each call recorded; an
    ``update`` refused ``pending_after`` times (the job still running)."""

    def __init__(self, nodes="n1 n2 n3", requeue=(0, ""), pending_after=0, end=None):
        self.calls: list[list[str]] = []
        self.nodes, self.requeue, self.pending_after, self.end = nodes, requeue, \
            pending_after, end

    def __call__(self, command: list[str]) -> tuple[int, str]:
        self.calls.append(command)
        if command[0] == "sinfo":
            return 0, "\n".join(self.nodes.split())
        if command[:2] == ["scontrol", "requeue"]:
            return self.requeue
        if command[:2] == ["scontrol", "update"]:
            self.pending_after -= 1
            return (0, "") if self.pending_after < 0 else \
                (1, "Job is no longer pending execution for job 7")
        if command[:3] == ["scontrol", "show", "hostnames"]:
            return 0, "n1\nn2"
        if command[0] == "squeue":
            return (0, self.end) if self.end else (0, "N/A")
        raise AssertionError(command)

    def named(self, *words: str) -> list[list[str]]:
        return [c for c in self.calls if c[:len(words)] == list(words)]


def said(cut: Cut, folder: Path, limit: int, slurm: Slurm, env: dict[str, str] = JOB,
         **options) -> list[str]:
    """The lines ``requeue`` says, in order."""
    lines: list[str] = []
    requeue.requeue(cut, folder, limit, lines.append, slurm, env, **options)
    return lines


def test_a_lost_node_requeues_the_job_then_excludes_the_node_once_it_is_pending(tmp_path):
    slurm = Slurm(pending_after=2)
    lines = said(Cut("rank 1 on n2 is hung", "n2"), tmp_path, 3, slurm, pause=lambda _: None)
    assert lines == ["requeued job 7 (1 of 3 requeues by scalebench), excluding n2; the next "
                     "start resumes"]
    assert slurm.named("scontrol", "requeue") == [["scontrol", "requeue", "7"]]
    assert slurm.named("scontrol", "update")[-1] == ["scontrol", "update", "JobId=7",
                                                      "ExcNodeList=n2"]
    assert len(slurm.named("scontrol", "update")) == 3  # refused twice while running
    assert read_requeues(tmp_path, "7") == Requeues("7", 1, 3, ["n2"],
                                                    ["rank 1 on n2 is hung"])


def test_the_requeue_is_said_before_the_exclusion_is_set(tmp_path):
    """The requeue ends this process within SLURM's KillWait: its line must be out before
    the (retried) exclusion, or a slow exclusion leaves the log without it."""
    slurm = Slurm(pending_after=2)
    calls_when_said: list[list[list[str]]] = []
    requeue.requeue(Cut("node lost", "n2"), tmp_path, 3,
                    lambda _: calls_when_said.append(list(slurm.calls)), slurm, JOB,
                    pause=lambda _: None)
    [before] = calls_when_said
    assert before[-1] == ["scontrol", "requeue", "7"]
    assert not [c for c in before if c[:2] == ["scontrol", "update"]]


def test_the_restart_limit_counts_the_launchers_own_requeues_of_this_job(tmp_path):
    write_requeues(tmp_path, Requeues("7", 2, 2, [], ["out of time", "out of time"]))
    slurm = Slurm()
    [line] = said(Cut("out of time"), tmp_path, 2, slurm)
    assert line == "the restart limit is reached (2 of 2 requeues by scalebench); requeue " \
                   "the job to complete them (scontrol requeue 7)"
    assert slurm.calls == []
    # another job's record (a new submission under the same result name) counts nothing
    assert read_requeues(tmp_path, "8") == Requeues("8")


def test_a_time_limit_requeue_after_finished_experiments_is_not_counted(tmp_path):
    """A campaign over many allocations: each that finished an experiment continues it past
    a reached limit; one that finished none counts, so a campaign that cannot advance stops."""
    write_requeues(tmp_path, Requeues("7", 2, 2, [], ["lost", "lost"]))
    slurm = Slurm()
    [line] = said(Cut("out of time", time_limit=True), tmp_path, 2, slurm, progressed=True)
    assert line == "requeued job 7 (the time limit's, after finished experiments: not " \
                   "counted against the limit of 2); the next start resumes"
    assert read_requeues(tmp_path, "7") == Requeues("7", 2, 2, [], ["lost", "lost",
                                                                  "out of time"], 1)
    [line] = said(Cut("out of time", time_limit=True), tmp_path, 2, slurm, progressed=False)
    assert line.startswith("the restart limit is reached (2 of 2 requeues by scalebench)")
    # a lost node is counted whatever finished before it
    [line] = said(Cut("node lost", "n2"), tmp_path, 2, slurm, progressed=True)
    assert line.startswith("the restart limit is reached")
    assert len(slurm.named("scontrol", "requeue")) == 1


def test_with_no_node_left_it_requeues_without_exclusion_and_says_so(tmp_path):
    slurm = Slurm(nodes="n1 n2")
    [line] = said(Cut("node lost", "n2"), tmp_path, 3, slurm)
    assert line.endswith("; no node left to run on without n2: requeued without excluding "
                         "any; the next start resumes")
    assert slurm.named("scontrol", "update") == []
    assert slurm.named("sinfo") == [["sinfo", "-h", "-N", "-o", "%N", "-p", "debug"]]


def test_an_exclusion_that_cannot_be_set_is_kept_for_the_next_start(tmp_path):
    slurm = Slurm(pending_after=10**6)
    lines = said(Cut("node lost", "n2"), tmp_path, 3, slurm, pause=lambda _: None)
    assert lines == ["requeued job 7 (1 of 3 requeues by scalebench), excluding n2; the next "
                     "start resumes", "SLURM did not take the exclusion of n2 for job 7, so a "
                     "start on it requeues again"]
    cut = requeue.start_on_excluded(tmp_path, slurm, JOB)  # the next start, on n1 and n2
    assert cut is not None and "runs on n2, which an earlier requeue excluded" in cut.why
    assert requeue.start_on_excluded(tmp_path, slurm, {**JOB, "SLURM_JOB_ID": "8"}) is None


def test_a_refused_requeue_says_what_to_type_and_counts_nothing(tmp_path):
    slurm = Slurm(requeue=(1, "scontrol: error: Requested operation is presently disabled "
                              "for job 7"))
    [line] = said(Cut("node lost", "n2"), tmp_path, 3, slurm)
    assert line == "SLURM refused to requeue the job (scontrol: error: Requested operation " \
                   "is presently disabled for job 7); requeue the job to complete them " \
                   "(scontrol requeue 7)"
    assert read_requeues(tmp_path, "7").count == 0


def test_an_experiment_whose_prediction_with_the_margin_does_not_fit_is_not_started():
    """What fits is the time before the limit's signal may come, not the time to the end."""
    cut = requeue.time_cut(80.0, 90.0 + WINDOW_S, "ct x pnp")
    assert cut == Cut("experiment ct x pnp is predicted to need 96 s with the margin, more "
                      "than the 90 s the job has before its time limit's signal may come",
                      time_limit=True)
    assert requeue.time_cut(80.0, 96.0 + WINDOW_S, "ct x pnp") is None
    assert requeue.time_cut(80.0, 100.0, "ct x pnp") is not None  # fits the end, not the signal
    assert requeue.time_cut(None, 10.0, "x") is None
    assert requeue.time_cut(80.0, None, "x") is None


def test_an_experiment_is_cut_on_the_time_of_all_its_repetitions_from_expand():
    """experiment_cut reads the expand child's ``experiment_s`` (every repetition, the
    operator norm only where the experiment computes it), not one run."""
    left_90_s = datetime.fromtimestamp(datetime.now().timestamp() + 90 + WINDOW_S).isoformat(
        timespec="seconds")
    experiment = {"label": "ct x pnp", "predicted": {"longest_phase_s": 5.0, "run_s": 40.0,
                                                     "experiment_s": 80.0,
                                                     "computes_norm": True}}
    cut = requeue.experiment_cut(experiment, Slurm(end=left_90_s), JOB)
    assert cut is not None and cut.why.startswith("experiment ct x pnp is predicted to need "
                                                  "96 s with the margin")
    shorter = {**experiment, "predicted": {**experiment["predicted"], "experiment_s": 60.0}}
    assert requeue.experiment_cut(shorter, Slurm(end=left_90_s), JOB) is None
    assert requeue.experiment_cut({**experiment, "predicted": None},
                                  Slurm(end=left_90_s), JOB) is None  # not calibrated
    assert requeue.experiment_cut(experiment, Slurm(end=left_90_s), {}) is None  # no job


def test_the_time_left_is_read_from_squeue_and_none_without_a_limit():
    end = datetime(2026, 12, 7, 3, 0, 0)
    slurm = Slurm(end=end.isoformat())
    assert requeue.time_left_s(slurm, JOB, now=end.timestamp() - 300) == pytest.approx(300)
    assert slurm.named("squeue") == [["squeue", "-h", "-j", "7", "-o", "%e"]]
    assert requeue.time_left_s(Slurm(), JOB) is None
    assert requeue.time_left_s(Slurm(end=end.isoformat()), {}) is None


def test_the_time_limits_sigterm_requeues_and_a_persons_scancel_does_not(tmp_path, capsys):
    soon = datetime.fromtimestamp(datetime.now().timestamp() + 100).isoformat(timespec="seconds")
    slurm = Slurm(end=soon)
    requeue.after_launch(None, signal.SIGTERM, tmp_path, 3, False, slurm, JOB)
    err = capsys.readouterr().err
    assert "stopping this allocation: the job's time limit is near (its SIGTERM)" in err
    assert slurm.named("scontrol", "requeue")
    later = datetime.fromtimestamp(datetime.now().timestamp() + 3600).isoformat(
        timespec="seconds")
    slurm = Slurm(end=later)
    requeue.after_launch(None, signal.SIGTERM, tmp_path, 3, False, slurm, JOB)
    assert slurm.named("scontrol", "requeue") == [] and capsys.readouterr().err == ""


def test_the_restart_limit_is_the_options_else_the_configs():
    assert requeue.restart_limit(1, [{"restart_limit": 3}]) == 1
    assert requeue.restart_limit(None, [{"restart_limit": 3}]) == 3
    assert requeue.restart_limit(None, []) == 0
    assert requeue.restart_limit_value("0", "--restart-limit") == 0
    for bad in ("-1", "two", "1.5", ""):
        with pytest.raises(ScalebenchError, match="is not a restart limit"):
            requeue.restart_limit_value(bad, "--restart-limit")


def test_the_record_is_json_beside_the_result(tmp_path):
    write_requeues(tmp_path / "r", Requeues("7", 1, 3, ["n2"], ["why"]))
    assert json.loads((tmp_path / "r" / requeue.RECORD_NAME).read_text())["exclude"] == ["n2"]


def test_the_batch_templates_ask_for_the_limit_signal_the_launcher_counts_on():
    """The launcher stops before ``LIMIT_SIGNAL_LEAD_S`` (and SLURM's early minute): the
    templates' ``--signal`` must be that lead, or the signal cuts experiments it started."""
    from tests.support.paths import REPO

    for template in ("multinode.sh", "singlenode.sh"):
        lines = (REPO / "slurm_templates" / template).read_text().splitlines()
        signals = [line for line in lines if line.startswith("#SBATCH --signal=")]
        assert signals == [f"#SBATCH --signal=B:TERM@{LIMIT_SIGNAL_LEAD_S}"], template
