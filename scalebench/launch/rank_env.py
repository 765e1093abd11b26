"""The rank environment of a process: the one place that maps SLURM's task variables to the
RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT that torch's
process group, the launcher and provenance read.

Used by the rank entry point (``--from-slurm``), by the container command lines (a clean
container environment has no SLURM_* variables), by the run context of tasks that SLURM
started without a launcher (benchopt's submitit backend), and by the batch templates through
its command line. Standard library only.

    python -m scalebench.launch.rank_env master-addr     the address of the job's first node
    python -m scalebench.launch.rank_env master-port [--offset N | --preflight]
                                                         the job's port (+ N, or the pre-flight's)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping, MutableMapping

# MASTER_PORT of a SLURM job: PORT_BASE + (job id x JOB_STRIDE + offset) mod PORT_SPAN, the
# offset being the experiment's index for the launcher's srun steps (mod EXPERIMENT_PORT_SPAN)
# or PREFLIGHT_PORT_OFFSET for the pre-flight check. The stride is larger than every offset,
# so that the steps of one job never meet on a port, nor those of jobs with nearby ids that
# share a node.
PORT_BASE, PORT_SPAN = 20000, 45000
EXPERIMENT_PORT_SPAN = 1000  # srun steps of one job: offsets 0..999
PREFLIGHT_PORT_OFFSET = EXPERIMENT_PORT_SPAN
JOB_STRIDE = 1009  # a prime above every offset


# The variables of a SLURM task that make a process one rank of several (slurm_ranks reads
# them); a process that runs a job of its own inside such a task hides them from it.
TASK_VARIABLES = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
                  "SLURM_TASKS_PER_NODE")


def slurm_ranks(env: Mapping[str, str]) -> dict[str, str]:
    """RANK & co. from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE."""
    per_node = env.get("SLURM_NTASKS_PER_NODE", "") or env.get("SLURM_TASKS_PER_NODE", "1")
    return {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": env["SLURM_NTASKS"],
            "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
            "LOCAL_WORLD_SIZE": per_node.split("(")[0].split(",")[0]}


def master_port(job_id: str | int | None, offset: int = 0) -> int:
    """The rendezvous port of a SLURM job (``offset``: which of its steps)."""
    return PORT_BASE + (int(job_id or 0) * JOB_STRIDE + offset) % PORT_SPAN


def first_node_address(nodelist: str | None = None) -> str:
    """NodeAddr of the job's first node (names may not resolve), else 127.0.0.1."""
    nodes = os.environ.get("SLURM_JOB_NODELIST", "") if nodelist is None else nodelist
    try:
        first = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True,
                               text=True, check=True, timeout=30).stdout.split()[0]
        record = subprocess.run(["scontrol", "show", "node", first], capture_output=True,
                                text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError, IndexError):
        return "127.0.0.1"
    for word in record.split():
        if word.startswith("NodeAddr="):
            return word.removeprefix("NodeAddr=")
    return first


def export_rank_environment(env: MutableMapping[str, str] = os.environ) -> None:
    """Fill RANK & co., MASTER_ADDR and MASTER_PORT from SLURM's task variables when no
    launcher set them (a task of several that SLURM started itself)."""
    if "RANK" in env or int(env.get("SLURM_NTASKS", "1")) <= 1 or "SLURM_PROCID" not in env:
        return
    env.update(slurm_ranks(env))
    env.setdefault("MASTER_ADDR", first_node_address(env.get("SLURM_JOB_NODELIST", "")))
    env.setdefault("MASTER_PORT", str(master_port(env.get("SLURM_JOB_ID"))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalebench.launch.rank_env",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("master-addr", help="the address of the job's first node")
    port = commands.add_parser("master-port", help="the job's rendezvous port")
    which = port.add_mutually_exclusive_group()
    which.add_argument("--offset", type=int, default=0, help="which of the job's steps")
    which.add_argument("--preflight", action="store_const", dest="offset",
                       const=PREFLIGHT_PORT_OFFSET, help="the pre-flight check's port")
    args = parser.parse_args(argv)
    if args.command == "master-addr":
        print(first_node_address())
    else:
        print(master_port(os.environ.get("SLURM_JOB_ID"), args.offset))
    return 0


if __name__ == "__main__":
    sys.exit(main())
