"""What a cluster's faults cost a campaign, measured on a three-node SLURM cluster run on this
machine (tests/support/slurm_cluster.py, as the test suite builds it, with a short restart
delay: credentials expiring after ``RESTART_DELAY_S``; a fresh one per case), each job
submitted with slurm_templates/multinode.sh as users submit it (``#SBATCH --requeue``, its
time limit's ``--signal``):

- stopped-rank: three experiments (48 x 48 CT, DnCNN on tiles, 40 iterations) on two nodes,
  one rank each; every process of rank 1 stopped (SIGSTOP, a frozen node) in the middle of
  the second, at the default 60 s silence bound. Targets: the rank named with its node
  within 90 s of the stop; the requeue and the exclusion of the node (the job's ExcNodeList)
  within 60 s more; the result complete, every row once (per experiment id and stop_val),
  the restart's rows written on the nodes left.
- time-limit: six one-rank experiments of about a minute (128 x 128 CT, DnCNN; the iteration
  count from the configuration's calibration by ``scalebench capacity --quick``, made first:
  the time-left check acts on calibrated experiments only) under ``sbatch --time=3``.
  Targets: complete over the job's own restarts, every row once, at most one experiment's
  work lost per allocation; the allocations used beside ``scalebench plan --allocation-time
  3min``'s prediction.
- killed-node: the stopped-rank campaign, the ``slurmd`` of rank 1's node killed in the
  second experiment, then its step's processes (as tests/system/test_slurm_faults.py's
  lost-node test). Target: the result completes by itself, every row once.

Per case: when the rank was named, the job requeued, the node excluded and the job ended, in
seconds after the fault (time-limit: the submission), the allocations, rows and verdict, as
a table once every case ran (each row on stderr as its case ends, with the jobs' lines);
then the targets and the load average at the start and the end.

    python -m tools.cluster_faults [--folder DIR] [--only CASE ...]
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from tests.support.slurm_cluster import LocalSlurmCluster, ensure_slurm_installed
from tests.support.slurm_jobs import (
    CONFIG,
    DATASET,
    SOLVER,
    Outcome,
    Timeline,
    follow,
    iterating,
    job_log,
    outcome,
    rank_node,
    rank_processes,
    step_processes,
    submit,
    wait_for,
)
from tools.measuring import (
    Table,
    load_text,
    print_outcome,
    private_benchmark,
    run_scalebench,
    table_line,
    tool_parser,
    write_config,
)

CASES = ("stopped-rank", "time-limit", "killed-node")
NAMED_S, REQUEUED_S = 90.0, 60.0  # the targets: naming after the fault, requeue after that
RANK = 1  # the rank a fault strikes (the batch script runs beside rank 0)
FAULT_ITERATIONS = 40  # long enough for the fault to land in the middle of an experiment
EXPERIMENT_S = 60.0  # each time-limit experiment's predicted length
TIME_LIMIT_MIN = 3
LIMIT_EXPERIMENTS = 6
START_TIMEOUT_S = 600.0  # until the second experiment iterates
JOB_TIMEOUT_S = 1500.0  # a job still running after this long is given up
# The cluster's credential lifetime, which a requeued job waits out (SLURM's default: 120 s).
RESTART_DELAY_S = 30


def expected_rows(config: dict) -> int:
    """Rows of a complete result: each experiment's iterations and its initial estimate."""
    return sum(params["max_iter"] + 1 for entry in config["solver"]
               for params in entry.values())


# --- the faults -----------------------------------------------------------------------------

FAULT_CONFIG = {**CONFIG, "solver": [{"pnp": {**params, "max_iter": FAULT_ITERATIONS}}
                                     for entry in CONFIG["solver"] for params in entry.values()]}


def strike_mid_campaign(cluster: LocalSlurmCluster, workspace: Path, name: str,
                        strike: Callable[[str, str], None]
                        ) -> tuple[str, float, Timeline, Outcome]:
    """The fault campaign on two nodes, ``strike(job, node)`` once its second experiment
    iterates (rank 1 on ``node``): the struck node, the fault's moment, what followed and
    the result."""
    job = submit(cluster, workspace, name, config=FAULT_CONFIG)
    print(f"  {name}: job {job}", file=sys.stderr, flush=True)
    wait_for(lambda: iterating(workspace, name, "2/3"), START_TIMEOUT_S,
             "the second experiment's iterations")
    node = rank_node(job, RANK)
    assert node is not None, f"no process of rank {RANK}"
    fault_at = time.monotonic()
    strike(job, node)
    seen = follow(cluster, job, job_log(workspace, name, job), f"rank {RANK} on {node}", node,
                  JOB_TIMEOUT_S)
    return node, fault_at, seen, outcome(cluster, workspace, name, expected_rows(FAULT_CONFIG))


def stopped_rank(cluster: LocalSlurmCluster, workspace: Path) -> tuple[list, list]:
    def stop(job: str, node: str) -> None:
        for pid in rank_processes(job, RANK):
            os.kill(pid, signal.SIGSTOP)

    node, fault_at, seen, result = strike_mid_campaign(cluster, workspace, "stopped", stop)
    never = float("inf")
    named = seen.named_at or never
    requeued = max(seen.requeued_at or never, seen.excluded_at or never)
    on_left = bool(result.restart_nodes) and node not in result.restart_nodes
    targets = [
        (f"stopped-rank: rank {RANK} named with its node within {NAMED_S:.0f} s of the stop",
         named - fault_at <= NAMED_S, seen.after(seen.named_at, fault_at)),
        (f"stopped-rank: requeue and exclusion of {node} within {REQUEUED_S:.0f} s of the "
         f"naming", requeued - named <= REQUEUED_S,
         f"requeued {seen.after(seen.requeued_at, fault_at)}, excluded "
         f"{seen.after(seen.excluded_at, fault_at)} after the stop"),
        ("stopped-rank: complete, every row once", result.whole, result.text()),
        (f"stopped-rank: the restart ran on the nodes left without {node}", on_left,
         ",".join(sorted(result.restart_nodes)) or "no restart rows")]
    return row("stopped-rank", f"SIGSTOP of rank {RANK}'s processes on {node}, experiment "
               f"2/3", fault_at, seen, str(seen.allocations), result, targets), targets


def killed_node(cluster: LocalSlurmCluster, workspace: Path) -> tuple[list, list]:
    def kill(job: str, node: str) -> None:
        victims = step_processes(job, node)
        assert victims, f"no step process of the job on {node}"
        cluster.kill_slurmd(node)
        for pid in victims:  # slurmstepd first: nothing reports the tasks' end
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    node, fault_at, seen, result = strike_mid_campaign(cluster, workspace, "killed", kill)
    done = seen.state == "COMPLETED" and result.whole
    targets = [("killed-node: completes by itself, every row once, no command typed", done,
                f"job {seen.state}, {result.text()}, restart on "
                f"{','.join(sorted(result.restart_nodes)) or '-'}")]
    return row("killed-node", f"slurmd and rank {RANK}'s step on {node} killed, experiment "
               f"2/3", fault_at, seen, str(seen.allocations), result, targets), targets


# --- the time limit -------------------------------------------------------------------------

def limit_config(iterations: list[int]) -> dict:
    """One rank's 128 x 128 CT with DnCNN, one experiment per iteration count (max_iter is
    not in a calibration's key: they share one)."""
    dataset = {"tomography_2d": {**DATASET["tomography_2d"], "image_size": 128,
                                 "num_angles": 60, "num_operators": 1}}
    solver = {key: value for key, value in SOLVER.items()
              if not key.startswith(("tile_", "distribute_"))}
    return {"objective": ["imaging_inverse_problem"], "dataset": [dataset],
            "solver": [{"pnp": {**solver, "max_iter": count}} for count in iterations],
            "max-runs": max(iterations) + 1, "timeout": 600}


def iterations_for(seconds: float) -> tuple[int, float]:
    """The iteration count whose experiment the cached calibration predicts nearest
    ``seconds`` (one process start, set-up with the norm, iterations with their evaluations),
    and that prediction."""
    from scalebench.planning.plan_time import experiment_run

    def predicted(count: int) -> float:
        (dataset, params), = limit_config([count])["dataset"][0].items()
        (solver, solver_params), = limit_config([count])["solver"][0].items()
        run = experiment_run({"dataset": {dataset: params}, "solver": {solver: solver_params}},
                             1)
        assert run is not None, "the calibration is not in the cache"
        return run.startup_s + run.run_s(norm=True)

    first, step = predicted(1), predicted(2) - predicted(1)
    count = max(2, 1 + round((seconds - first) / step))
    return count, predicted(count)


def time_limit(cluster: LocalSlurmCluster, workspace: Path) -> tuple[list, list]:
    calibrated = run_scalebench("capacity", write_config(workspace / "calibrate.yml",
                                                         limit_config([10])),
                                "--memory", "2GiB", "--quick")
    assert calibrated.returncode == 0, " ".join(calibrated.error_lines(2))
    count, predicted = iterations_for(EXPERIMENT_S)
    config = limit_config(list(range(count, count + LIMIT_EXPERIMENTS)))
    planned = run_scalebench("plan", write_config(workspace / "limit.yml", config),
                             "--allocation-time", f"{TIME_LIMIT_MIN}min", "--format", "json")
    assert planned.returncode == 0, " ".join(planned.error_lines(2))
    plan = json.loads(planned.stdout)["allocations"]
    print(f"  time-limit: calibrated in {calibrated.wall_s:.0f} s; {count} iterations "
          f"predicted at {predicted:.0f} s; plan: {plan['allocations']} allocations "
          f"({plan['experiments']})", file=sys.stderr, flush=True)
    submitted_at = time.monotonic()
    job = submit(cluster, workspace, "limit", ("--nodes=1", "--ntasks-per-node=1",
                                               f"--time={TIME_LIMIT_MIN}"), config=config)
    log = job_log(workspace, "limit", job)
    seen = follow(cluster, job, log, None, None, JOB_TIMEOUT_S)
    result = outcome(cluster, workspace, "limit", expected_rows(config))
    lost = lost_per_allocation(log.read_text(errors="replace"), result.frame)
    targets = [
        ("time-limit: completes over its restarts, every row once",
         seen.state == "COMPLETED" and result.whole, f"job {seen.state}, {result.text()}"),
        ("time-limit: at most one experiment's work lost per allocation",
         max(lost, default=0) <= 1, f"lost per allocation: {lost}")]
    return row("time-limit", f"--time={TIME_LIMIT_MIN}, {LIMIT_EXPERIMENTS} experiments of "
               f"{count}-{count + LIMIT_EXPERIMENTS - 1} iterations, about "
               f"{predicted:.0f} s each predicted", submitted_at, seen,
               f"{seen.allocations} (plan: {plan['allocations']})", result, targets), targets


def lost_per_allocation(log: str, frame: pd.DataFrame | None) -> list[int]:
    """Per start of the job (each begins with the template's ``[scalebench] job J:`` line):
    the experiments it started whose rows no start of its own wrote."""
    starts = re.split(r"^\[scalebench\] job \d+: ", log, flags=re.M)[1:]
    finished = {} if frame is None else \
        frame.groupby("prov_slurm_restart_count").experiment_id.agg(set).to_dict()
    return [len(set(re.findall(r"^\[scalebench\] experiment \d+/\d+ \(([^)]+)\)", text,
                               flags=re.M)) - finished.get(str(index) if index else "", set()))
            for index, text in enumerate(starts)]


# --- the table ------------------------------------------------------------------------------

COLUMNS = ("case", "fault", "named", "requeued", "excluded", "ended", "allocations", "rows",
           "verdict")


def row(case: str, fault: str, fault_at: float, seen: Timeline, used: str, result: Outcome,
        targets: list) -> list:
    requeues = ", ".join(seen.after(moment, fault_at) for moment in seen.requeues) or "-"
    missed = [name.split(": ", 1)[1] for name, met, _ in targets if not met]
    return [case, fault, seen.after(seen.named_at, fault_at), requeues,
            seen.after(seen.excluded_at, fault_at),
            f"{seen.after(seen.ended_at, fault_at)} ({seen.state or 'still running'})", used,
            result.text(), "MISSED: " + "; ".join(missed) if missed else "met"]


RUNS = {"stopped-rank": stopped_rank, "time-limit": time_limit, "killed-node": killed_node}


def run_case(case: str, folder: Path) -> tuple[list, list]:
    """One case on a cluster of its own; a case that could not run is a missed target."""
    workspace = folder / case
    workspace.mkdir(parents=True, exist_ok=True)
    private_benchmark(workspace)
    print(f"{case}: starting, load average {load_text()}", file=sys.stderr, flush=True)
    try:
        with LocalSlurmCluster(workspace / "slurm", nodes=3,
                               credential_lifetime_s=RESTART_DELAY_S) as cluster:
            return RUNS[case](cluster, workspace)
    except Exception as error:  # the other cases still run
        traceback.print_exc()
        for log in sorted(workspace.glob("*-*.out")):
            tail = log.read_text(errors="replace").splitlines()[-30:]
            print(f"  {log.name}:", *tail, sep="\n    ", file=sys.stderr, flush=True)
        return [case, f"could not run: {error}"], [(f"{case}: ran", False, str(error))]


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--folder", type=Path, default=None,
                        help="working folder (default: a temporary one, removed)")
    parser.add_argument("--only", choices=CASES, nargs="+", default=list(CASES),
                        help="the cases to run (default: all three)")
    args = parser.parse_args(argv)
    ensure_slurm_installed()
    started = load_text()
    targets = []
    with tempfile.TemporaryDirectory(prefix="cluster-faults-") as temporary:
        folder = (args.folder or Path(temporary)).resolve()
        rows = []
        for case in [case for case in CASES if case in args.only]:
            cells, found = run_case(case, folder)
            print(f"  {table_line(cells)}", file=sys.stderr, flush=True)  # shown at once
            rows.append(cells)
            targets += found
    return print_outcome(Table(*COLUMNS), rows, targets, started)


if __name__ == "__main__":
    sys.exit(main())
