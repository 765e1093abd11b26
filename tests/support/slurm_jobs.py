"""Jobs of slurm_templates/multinode.sh on a LocalSlurmCluster and the processes a fault
strikes: what tests/system/test_slurm_faults.py and tools/cluster_faults.py share."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from tests.support.cli import descendants, parent_of
from tests.support.paths import REPO
from tests.support.slurm_cluster import LocalSlurmCluster

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
        while parent > 1 and not _cmdline(parent).startswith("slurmstepd"):
            parent = parent_of(parent)
        if parent > 1 and ".batch]" not in _cmdline(parent):
            stepds.add(parent)
    found = sorted(stepds)
    for stepd in sorted(stepds):
        found += descendants(stepd)
    return found


def rank_processes(job: str, rank: int) -> list[int]:
    """The processes of ``job``'s task of rank ``rank`` (its wrapper, rank entry, benchopt)."""
    tasks = [pid for pid, environ in _environs()
             if f"SLURM_JOB_ID={job}" in environ and f"SLURM_PROCID={rank}" in environ
             and "SB_TASK_RANKS=1" in environ and not _cmdline(pid).startswith("slurmstepd")]
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


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""

