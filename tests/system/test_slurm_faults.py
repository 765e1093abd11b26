"""The faults a SLURM job meets, on the two-node cluster the tests start: a requeue in the
middle of an experiment, a node lost in the middle of one. Each time the job's result ends
complete, every row once, by the job's own restart (slurm_templates/multinode.sh with its
``#SBATCH --requeue``); the figures each test prints are those of docs/clusters.md."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pandas as pd

from tests.support.cli import copy_benchmark, run_cli
from tests.support.slurm_cluster import LocalSlurmCluster
from tests.support.slurm_jobs import (
    iterating,
    outputs,
    rank_processes,
    run_record,
    step_processes,
    submit,
    wait_for,
)

JOB_TIMEOUT_S = 400


def restart_and_wait(cluster: LocalSlurmCluster, job: str) -> tuple[str, float, float]:
    """Skip SLURM's delay before a requeued job starts again (about 2 min: a real cluster's
    wait, not the launcher's) and wait for the job's end: its state, when its first start
    had ended (the job pending again) and when the job ended."""
    pending_at = wait_for(lambda: cluster.job_state(job) == "PENDING", 60,
                          f"job {job} to be requeued")
    # The nodes revoke the first start's credential, to the second: a start within that
    # second is refused ("Job credential revoked"), which SLURM's own delay avoids.
    wait_for(lambda: all("State=IDLE" in line for line in
                         cluster.scontrol("show", "node", "-o").splitlines()), 60,
             "the nodes to be idle")
    time.sleep(2.0)
    cluster.scontrol("update", f"jobid={job}", "StartTime=now")
    wait_for(lambda: cluster.job_record(job).get("Restarts") != "0" and
             cluster.job_state(job) != "PENDING", JOB_TIMEOUT_S, f"job {job} to restart")
    state = cluster.wait(job, timeout=JOB_TIMEOUT_S)
    if state != "COMPLETED":
        print(cluster.scontrol("show", "job", job), cluster.log_tail(40), sep="\n")
    return state, pending_at, time.monotonic()


def assert_complete_once(workspace: Path, name: str, job: str, per_experiment: int) -> None:
    """Three experiments, every row once, the first from the job's first start and the two
    others from its restart; the provenance check passes."""
    result = outputs(workspace) / f"{name}.parquet"
    record = run_record(result)
    assert record["status"] == "complete" and len(record["experiments"]) == 3
    assert len(set(record["experiments"])) == 3
    df = pd.read_parquet(result)
    assert len(df) == 3 * per_experiment
    assert not df.duplicated(["experiment_id", "stop_val"]).any()
    assert sorted(set(df.p_solver_seed)) == [0, 1, 2] and set(df.prov_slurm_job_id) == {job}
    restarts = df.groupby("p_solver_seed").prov_slurm_restart_count.agg(set).to_dict()
    assert restarts == {0: {""}, 1: {"1"}, 2: {"1"}}, restarts
    checked = run_cli("check", result)
    assert checked.returncode == 0 and "complete provenance" in checked.stdout, \
        checked.stdout[-2000:]


def first_experiment_rows(workspace: Path, name: str) -> int:
    """Rows of the published file while only the first experiment is in it."""
    result = outputs(workspace) / f"{name}.parquet"
    assert run_record(result)["experiments"] and len(run_record(result)["experiments"]) == 1
    return len(pd.read_parquet(result))


def test_requeued_job_resumes_its_own_result(slurm_cluster, tmp_path):
    """``scontrol requeue`` in the middle of the second of three experiments: the restarted
    script resumes its result by itself; every row once, check complete, replay MATCH."""
    copy_benchmark(tmp_path)
    job = submit(slurm_cluster, tmp_path, "rq")
    wait_for(lambda: iterating(tmp_path, "rq", "2/3"), JOB_TIMEOUT_S,
             "the second experiment's iterations")
    kept = first_experiment_rows(tmp_path, "rq")
    requeued_at = time.monotonic()
    slurm_cluster.scontrol("requeue", job)
    state, pending_at, ended_at = restart_and_wait(slurm_cluster, job)
    log = (tmp_path / f"rq-{job}.out").read_text()
    assert state == "COMPLETED", log[-3000:]
    assert "CANCELLED AT" in log and "DUE TO JOB REQUEUE" in log  # both starts' logs kept
    assert f"restart 1 of job {job}: resuming" in log and "(1 experiment(s) finished" in log
    assert_complete_once(tmp_path, "rq", job, kept)
    started = time.monotonic()
    replayed = run_cli("replay", outputs(tmp_path) / "rq.parquet", timeout=900)
    verdicts = [line for line in replayed.stdout.splitlines() if line.split(" ")[0] in
                ("MATCH", "DIFFER", "REFUSED", "TAMPERED")]
    assert replayed.returncode == 0 and len(verdicts) == 3, \
        replayed.stdout[-2000:] + replayed.stderr[-2000:]
    assert all(line.startswith("MATCH") for line in verdicts), verdicts
    first_end = [line for line in log.splitlines() if line.startswith("[scalebench] stopped")]
    print(f"\nFIGURES requeue: first start ended with {first_end}; rows kept {kept} of "
          f"{3 * kept} before the requeue; requeue to "
          f"the first start's end {pending_at - requeued_at:.0f} s, to completion "
          f"{ended_at - requeued_at:.0f} s (start delay skipped); replay "
          f"{time.monotonic() - started:.0f} s")


def test_a_node_lost_mid_experiment_ends_the_job_and_a_requeue_completes_it(slurm_cluster,
                                                                           tmp_path):
    """Rank 1's processes and their slurmstepd on n2 killed in the second experiment: the
    job ends within the launcher's grace naming n2 and rank 1, the first experiment's rows
    stay, and, the launch allowed no requeue of its own (restart limit 0), ``scontrol
    requeue`` typed as its line says completes the result."""
    copy_benchmark(tmp_path)
    job = submit(slurm_cluster, tmp_path, "lost", SB_RESTART_LIMIT="0")
    wait_for(lambda: iterating(tmp_path, "lost", "2/3"), JOB_TIMEOUT_S,
             "the second experiment's iterations")
    kept = first_experiment_rows(tmp_path, "lost")
    victims = step_processes(job, "n2")
    assert victims, "no step process of the job on n2"
    lost_at = time.monotonic()
    for pid in victims:  # slurmstepd first: nothing reports the tasks' end
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    state = slurm_cluster.wait(job, timeout=JOB_TIMEOUT_S)
    ended_at = time.monotonic()
    log = (tmp_path / f"lost-{job}.out").read_text()
    assert state == "FAILED" and slurm_cluster.job_exit_code(job) == 1, log[-3000:]
    failed = [line for line in log.splitlines() if line.startswith("[scalebench] FAILED")]
    stopped = [line for line in log.splitlines() if line.startswith("[scalebench] stopped")]
    assert len(failed) == 1 and "experiment 2/3" in failed[0], log[-3000:]
    assert "(rank 1): never reported its end" in failed[0] and ", on n2;" in failed[0]
    assert len(stopped) == 1 and "rank 1 on n2" in stopped[0]
    assert f"[scalebench] the restart limit is reached (0 of 0 requeues by scalebench); " \
           f"requeue the job to complete them (scontrol requeue {job})" in log
    # SRUN_GRACE_S before SIGTERM to srun, as long again before SIGKILL, and the margin of
    # a loaded machine for rank 0 to see its peer gone and for the job's end.
    assert ended_at - lost_at < 2 * 30 + 60, ended_at - lost_at
    result = outputs(tmp_path) / "lost.parquet"
    record = run_record(result)
    assert record["status"] == "partial" and len(record["experiments"]) == 1
    assert record["failures"][0]["rank"] == 1 and record["failures"][0]["host"] == "n2"
    assert len(pd.read_parquet(result)) == kept

    requeued_at = time.monotonic()
    slurm_cluster.scontrol("requeue", job)
    state, _, completed_at = restart_and_wait(slurm_cluster, job)
    log = (tmp_path / f"lost-{job}.out").read_text()
    assert state == "COMPLETED", log[-3000:]
    assert_complete_once(tmp_path, "lost", job, kept)
    print(f"\nFIGURES lost node: exit 1, {stopped[0]!r}; rows kept {kept} of {3 * kept}; "
          f"fault to job end {ended_at - lost_at:.0f} s; requeue to completion "
          f"{completed_at - requeued_at:.0f} s (start delay skipped)")


def test_a_stopped_rank_is_named_and_the_job_requeues_itself_excluding_its_node(
        slurm_cluster, tmp_path):
    """Rank 1 of a one-node job stopped (SIGSTOP, as a frozen node looks) in the first
    experiment, the silence bound lowered to 10 s: the launcher names it with its node, and
    the job requeues itself with that node excluded, within 90 s of the stop."""
    copy_benchmark(tmp_path)
    job = submit(slurm_cluster, tmp_path, "hung", ("--nodes=1", "--ntasks-per-node=2"),
                 SCALEBENCH_HEARTBEAT_TIMEOUT_S="10")
    try:
        wait_for(lambda: iterating(tmp_path, "hung", "1/3"), JOB_TIMEOUT_S,
                 "the first experiment's iterations")
        node = slurm_cluster.job_record(job)["NodeList"]
        victims = rank_processes(job, 1)
        assert victims, "no process of rank 1"
        stopped_at = time.monotonic()
        for pid in victims:
            os.kill(pid, signal.SIGSTOP)
        excluded_at = wait_for(lambda: slurm_cluster.job_record(job).get("ExcNodeList")
                               == node, 90, f"job {job} to exclude {node}")
        log = (tmp_path / f"hung-{job}.out").read_text()
        assert f"rank 1 on {node} is hung: no heartbeat for" in log, log[-3000:]
        assert f"[scalebench] requeued job {job} (1 of 3 requeues by scalebench), " \
               f"excluding {node}; the next start resumes" in log, log[-3000:]
        assert slurm_cluster.job_record(job)["Restarts"] == "1"
    finally:
        slurm_cluster.scancel(job)
    print(f"\nFIGURES hung rank: stop to the requeue with {node} excluded "
          f"{excluded_at - stopped_at:.0f} s (silence bound 10 s)")
