"""Jobs of slurm_templates/multinode.sh on a LocalSlurmCluster, the processes a fault strikes,
and what a job did (its timeline, its result): what tests/system/test_slurm_faults.py and
tools/cluster_faults.py share."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from tests.support.cli import command_line, descendants, parent_of
from tests.support.paths import REPO
from tests.support.slurm_cluster import FINAL_STATES, LocalSlurmCluster

TEMPLATE = REPO / "slurm_templates" / "multinode.sh"
DATASET = {"tomography_2d": {"image_size": 48, "num_angles": 12, "num_operators": 4,
                             "noise_level": 0.05}}
SOLVER = {"max_iter": 12, "device": "cpu", "denoiser": "dncnn", "denoiser_sigma": 0.05,
          "tile_size": 16, "tile_overlap": 8, "distribute_physics": True,
          "distribute_denoiser": True, "num_threads": 1}
# Three experiments, one per seed; the fault tests strike the second.
CONFIG = {"objective": ["imaging_inverse_problem"], "dataset": [DATASET],
          "solver": [{"pnp": {**SOLVER, "seed": seed}} for seed in range(3)],
          "max-runs": 100, "timeout": 300}


def submit(cluster: LocalSlurmCluster, workspace: Path, name: str,
           layout: tuple[str, ...] = ("--nodes=2", "--ntasks-per-node=1"),
           config: dict = CONFIG, **variables: str) -> str:
    """The multinode template running ``config`` (by default on two nodes, one rank each,
    further sbatch options in ``layout``) on this interpreter (a worktree of the repository
    has no .venv of its own), ``variables`` exported too; its log is
    ``workspace/NAME-JOB.out`` (``job_log``)."""
    path = workspace / f"{name}.yml"
    path.write_text(json.dumps(config))
    exports = {"SB_CONFIG": str(path), "SB_OUTPUT": name, "SB_HTML": "0",
               "SB_BENCHMARK": str(workspace / "benchmark_inference"), "SB_REPO": str(REPO),
               "SB_PYTHON": sys.executable, **variables}
    return cluster.sbatch([*layout, f"--output={workspace}/{name}-%j.out", str(TEMPLATE)],
                          env={**os.environ, **cluster.env, **exports}, cwd=str(REPO))


def job_log(workspace: Path, name: str, job: str) -> Path:
    return workspace / f"{name}-{job}.out"


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll until ``condition``; the time it became true."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return time.monotonic()


def outputs(workspace: Path) -> Path:
    return workspace / "benchmark_inference" / "outputs"


def iterating(workspace: Path, name: str, position: str) -> bool:
    """Whether experiment ``position`` (k/N) of the launch ``name`` is in its iterations."""
    logs = outputs(workspace).glob(f".staging-{name}-*/*/rank0.log")
    return any(f"experiment {position}: iteration" in log.read_text(errors="replace")
               for log in logs)


def run_record(result: Path) -> dict:
    return json.loads(pq.read_metadata(result).metadata[b"scalebench.run"])


def step_processes(job: str, node: str) -> list[int]:
    """The slurmstepd of ``job``'s running srun step on ``node`` (not the batch step), then
    every process under it: what dies with a lost node."""
    tasks = [pid for pid, environ in _environs()
             if f"SLURM_JOB_ID={job}" in environ and f"SLURMD_NODENAME={node}" in environ
             and "SB_TASK_RANKS=1" in environ]
    stepds = set()
    for pid in tasks:
        parent = pid
        while parent > 1 and not command_line(parent).startswith("slurmstepd"):
            parent = parent_of(parent)
        if parent > 1 and ".batch]" not in command_line(parent):
            stepds.add(parent)
    found = sorted(stepds)
    for stepd in sorted(stepds):
        found += descendants(stepd)
    return found


def rank_processes(job: str, rank: int) -> list[int]:
    """The processes of ``job``'s task of rank ``rank`` (its wrapper, rank entry, benchopt)."""
    tasks = [pid for pid, environ in _environs()
             if f"SLURM_JOB_ID={job}" in environ and f"SLURM_PROCID={rank}" in environ
             and "SB_TASK_RANKS=1" in environ and not command_line(pid).startswith("slurmstepd")]
    roots = [pid for pid in tasks if parent_of(pid) not in tasks]
    return sorted({*roots, *(child for root in roots for child in descendants(root))})


def rank_node(job: str, rank: int) -> str | None:
    """The node ``job``'s task of rank ``rank`` runs on (its SLURMD_NODENAME); None when it
    has no process."""
    for _, environ in _environs():
        if f"SLURM_JOB_ID={job}" in environ and f"SLURM_PROCID={rank}" in environ \
                and "SB_TASK_RANKS=1" in environ:
            return next((item.split("=", 1)[1] for item in environ
                         if item.startswith("SLURMD_NODENAME=")), None)
    return None


def _environs() -> list[tuple[int, list[str]]]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            found.append((int(proc.name),
                          (proc / "environ").read_bytes().decode(errors="replace").split("\0")))
        except OSError:
            continue
    return found


# --- what a job did ---------------------------------------------------------------------------

@dataclass
class Timeline:
    """What a watcher saw of one job, by its own clock: when a line of the job's log first
    named what was struck, each requeue (the job's restart count going up), when a node was
    excluded on the job, the job's end and its last state."""

    named_at: float | None = None
    requeues: list[float] = field(default_factory=list)
    excluded_at: float | None = None
    ended_at: float | None = None
    state: str = ""

    @property
    def allocations(self) -> int:
        return len(self.requeues) + 1

    @property
    def requeued_at(self) -> float | None:
        return self.requeues[0] if self.requeues else None

    def after(self, moment: float | None, fault: float) -> str:
        """``moment`` in seconds after ``fault``, '-' for one that did not come."""
        return "-" if moment is None else f"{moment - fault:.0f} s"


def follow(cluster: LocalSlurmCluster, job: str, log: Path, naming: str | None,
           node: str | None, timeout: float) -> Timeline:
    """Poll ``job`` and its ``log`` until it ends (or ``timeout``), noting when a scalebench
    line holding ``naming`` came, each requeue and when ``node`` was excluded; the log's
    scalebench lines and the job's states go to stderr as they come, in seconds from the
    call."""
    seen, started, shown, state = Timeline(), time.monotonic(), 0, ""
    while time.monotonic() < started + timeout:
        record, now = cluster.job_record(job), time.monotonic()
        text = log.read_text(errors="replace") if log.is_file() else ""
        lines = [line for line in text.splitlines() if line.startswith("[scalebench]")]
        changed, state = record.get("JobState", "") != state, record.get("JobState", "")
        moved = [f"job {state} on {record.get('NodeList')}, {record.get('Restarts')} "
                 f"restart(s)"] if changed else []
        for line in [*moved, *lines[shown:]]:
            print(f"    {now - started:4.0f} s  {line}", file=sys.stderr, flush=True)
        shown = len(lines)
        seen.requeues += [now] * (int(record.get("Restarts") or 0) - len(seen.requeues))
        if naming and seen.named_at is None and any(naming in line for line in lines):
            seen.named_at = now
        if node and seen.excluded_at is None and \
                node in record.get("ExcNodeList", "").split(","):
            seen.excluded_at = now
        seen.state = state
        if state in FINAL_STATES:
            seen.ended_at = now
            break
        time.sleep(0.5)
    return seen


@dataclass(frozen=True)
class Outcome:
    """A job's result file: its run status, its rows against those expected, the rows of an
    (experiment id, stop_val) found more than once, and the nodes its restarts ran on."""

    status: str
    rows: int
    expected: int
    repeated: int
    restart_nodes: frozenset[str]
    frame: pd.DataFrame | None = None

    @property
    def whole(self) -> bool:
        return self.status == "complete" and self.rows == self.expected and not self.repeated

    def text(self) -> str:
        if not self.rows:
            return f"0/{self.expected} ({self.status})"
        return f"{self.rows}/{self.expected} ({self.status}), " + \
            (f"{self.repeated} more than once" if self.repeated else "each once")


def outcome(cluster: LocalSlurmCluster, workspace: Path, name: str, expected: int) -> Outcome:
    """The result ``name`` of a job in ``workspace``, ``expected`` rows when complete."""
    result = outputs(workspace) / f"{name}.parquet"
    if not result.is_file():
        return Outcome("no result file", 0, expected, 0, frozenset())
    frame = pd.read_parquet(result)
    counts = frame.groupby(["experiment_id", "stop_val"]).size()
    restarted = frame[frame.prov_slurm_restart_count != ""].prov_slurm_nodelist.unique()
    nodes = {node for nodelist in restarted
             for node in cluster.scontrol("show", "hostnames", nodelist).split()}
    return Outcome(run_record(result)["status"], len(frame), expected,
                   int(counts[counts > 1].sum()), frozenset(nodes), frame)
