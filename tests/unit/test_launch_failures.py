"""Failure diagnosis (scalebench.launch.failures): of the ranks' notes and exit statuses, the
rank that failed first is the cause, consequences (a lost peer, ranks the launcher stopped)
come after, and the line names the rank, how it ended and where."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path
from types import SimpleNamespace

from scalebench.launch.failures import (
    error_line,
    experiment_failure,
    failure_message,
    lost_step_message,
)
from scalebench.launch.liveness import Hung
from scalebench.launch.processes import RankGroup

EXPERIMENT = {"id": "e1", "label": "superres pnp"}


def note(folder: Path, rank: int, failed_at: float, log_tail: list[str], exit_status: int = 1,
         signalled: bool = False, progress: str = "at iteration 3/10") -> None:
    """The note ``rank_entry`` writes for a failed rank."""
    (folder / f"rank{rank}.failed").write_text(json.dumps({
        "rank": rank, "host": f"node{rank}", "exit_status": exit_status, "signalled": signalled,
        "failed_at": failed_at, "progress": progress, "log_tail": log_tail}))


def group(statuses: list[int], ended_at: list[float | None],
          signalled_at: float = math.inf) -> RankGroup:
    """A finished group whose processes ended with ``statuses`` (no process is started)."""
    processes = [SimpleNamespace(returncode=status) for status in statuses]
    return RankGroup(processes, ended_at=ended_at, signalled_at=signalled_at)


def test_the_error_line_is_the_last_exception_without_torchs_rank_prefix():
    tail = ["Traceback (most recent call last):", '  File "x.py", line 1',
            "[rank1]: torch.distributed.DistBackendError: NCCL failed: boom",
            "during handling, another:", "[rank1]: ValueError: image_size must be > 0", ""]
    assert error_line(tail) == "ValueError: image_size must be > 0"
    assert error_line(["warming up", "out of patience", ""]) == "out of patience"
    assert error_line([]) == ""


def test_a_rank_that_lost_its_peer_is_a_consequence_even_when_it_failed_first(tmp_path):
    note(tmp_path, 0, 10.0, ["RuntimeError: Connection closed by peer"])
    note(tmp_path, 1, 12.0, ["ValueError: bad operator"])
    failure = experiment_failure(tmp_path, EXPERIMENT, group([1, 1], [10.0, 12.0]), True)
    assert failure == {"experiment": "e1", "label": "superres pnp", "rank": 1, "host": "node1",
                       "error": "exited with status 1 at iteration 3/10: ValueError: bad "
                                "operator, on node1"}


def test_a_rank_the_launcher_stopped_is_a_consequence_even_when_it_ended_first(tmp_path):
    note(tmp_path, 0, 20.0, ["KeyboardInterrupt: stopped"], exit_status=-15, signalled=True)
    note(tmp_path, 1, 30.0, ["MemoryError: out of memory"])
    failure = experiment_failure(tmp_path, EXPERIMENT, group([-15, 1], [20.0, 30.0]), True)
    assert failure["rank"] == 1 and failure["error"].startswith("exited with status 1")


def test_a_rank_ending_once_the_ranks_were_signalled_comes_after_one_ending_before(tmp_path):
    """Rank 1 was killed before the launcher signalled the group (it left no note, its end
    unseen); rank 0 ended after the signal: rank 1 is the cause."""
    note(tmp_path, 0, 20.0, ["RuntimeError: stopped"])
    failure = experiment_failure(tmp_path, EXPERIMENT, group([1, -9], [20.0, 8.0],
                                                             signalled_at=15.0), True)
    assert failure["rank"] == 1 and failure["error"].startswith("killed by SIGKILL")


def test_a_local_rank_killed_without_a_note_is_found_by_its_exit_status(tmp_path):
    note(tmp_path, 1, 50.0, ["RuntimeError: Connection reset by peer"])
    failure = experiment_failure(tmp_path, EXPERIMENT, group([-9, 1], [40.0, 50.0]), True)
    assert failure["rank"] == 0
    assert failure["error"] == f"killed by SIGKILL, on {socket.gethostname()}"


def test_an_srun_step_without_notes_reports_its_exit_statuses(tmp_path):
    """Under srun one process is the whole step: its status names no rank."""
    failure = experiment_failure(tmp_path, EXPERIMENT, group([1], [5.0]), False)
    assert failure["rank"] is None and failure["error"] == "exit statuses [1]"


def test_a_rank_that_ended_well_without_its_result_says_so(tmp_path):
    note(tmp_path, 0, 1.0, ["done"], exit_status=0, progress="after iteration 10/10")
    failure = experiment_failure(tmp_path, EXPERIMENT, group([0], [1.0]), True)
    assert failure["error"] == ("ended after iteration 10/10 without writing its result file, "
                                "on node0")


def test_the_failure_line_names_the_experiment_rank_error_and_log(tmp_path):
    failure = {"experiment": "e1", "label": "superres pnp", "rank": 2, "host": "node2",
               "error": "killed by SIGKILL, on node2"}
    log = tmp_path / "logs" / "e1.rank2.log"
    assert failure_message(failure, "2/5", log) == (
        f"[scalebench] FAILED experiment 2/5 superres pnp (rank 2): killed by SIGKILL, on "
        f"node2; log: {log}")


def started(folder: Path, rank: int, host: str) -> None:
    """The note ``rank_entry`` writes when a rank starts (removed when it reports its end)."""
    (folder / f"rank{rank}.started").write_text(json.dumps({"rank": rank, "host": host,
                                                            "pid": 1}))


def test_an_srun_rank_that_never_reported_its_end_is_the_cause_named_with_its_node(tmp_path):
    """Rank 1's processes died with node n2: rank 0 lost its peer and said so, rank 1 left
    only its start note."""
    note(tmp_path, 0, 10.0, ["RuntimeError: Connection closed by peer"])
    started(tmp_path, 1, "n2")
    failure = experiment_failure(tmp_path, EXPERIMENT, group([1], [11.0]), False)
    assert failure["rank"] == 1 and failure["host"] == "n2"
    assert failure["error"] == ("never reported its end (its node lost, or its processes "
                                "killed), on n2")


def test_a_rank_that_reported_its_own_failure_comes_before_one_that_never_reported(tmp_path):
    """srun killed rank 0 outright once rank 1 raised: rank 1 is the cause."""
    started(tmp_path, 0, "n1")
    note(tmp_path, 1, 10.0, ["ValueError: bad operator"])
    failure = experiment_failure(tmp_path, EXPERIMENT, group([1], [11.0]), False)
    assert failure["rank"] == 1 and "ValueError: bad operator" in failure["error"]


def test_local_ranks_are_named_by_their_exit_status_not_their_start_notes(tmp_path):
    started(tmp_path, 0, "elsewhere")
    failure = experiment_failure(tmp_path, EXPERIMENT, group([-9], [5.0]), True)
    assert failure["rank"] == 0 and failure["error"].startswith("killed by SIGKILL")


def test_the_lost_step_line_names_rank_node_and_what_is_kept(tmp_path):
    failure = {"experiment": "e1", "label": "superres pnp", "rank": 1, "host": "n2",
               "error": "never reported its end"}
    final = tmp_path / "r.parquet"
    step = RankGroup([], grace_s=30.0)
    assert lost_step_message(failure, step, final) == (
        "[scalebench] stopped: the srun step of rank 1 on n2 did not end within 30 s of the "
        "first failure (its node lost?), so no further experiment starts on this allocation; "
        "no experiment was published")
    final.write_bytes(b"")
    assert f"the experiments finished so far are in {final}" in \
        lost_step_message(failure, step, final)


def test_a_hung_rank_is_the_cause_and_stops_the_allocation_as_a_lost_node(tmp_path,
                                                                          monkeypatch):
    """Rank 1 was found silent: the others, stopped because of it, are not blamed, and the
    lost-node line names it."""
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    note(tmp_path, 0, 10.0, ["RuntimeError: Connection closed by peer"])
    stopped = group([-15], [12.0], signalled_at=11.0)
    stopped.hung = Hung(1, "n2", "no heartbeat for 61 s (stopped, or its node frozen)")
    failure = experiment_failure(tmp_path, EXPERIMENT, stopped, False)
    assert (failure["rank"], failure["host"]) == (1, "n2")
    assert failure["error"] == "hung: no heartbeat for 61 s (stopped, or its node frozen), on n2"
    assert lost_step_message(failure, stopped, tmp_path / "r.parquet").startswith(
        "[scalebench] stopped: rank 1 on n2 is hung: no heartbeat for 61 s (stopped, or its "
        "node frozen), so no further experiment starts on this allocation")
