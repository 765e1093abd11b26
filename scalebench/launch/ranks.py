"""Starting the ranks of one experiment and waiting for them, locally or through srun.

Locally, ``nproc`` processes get RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE /
MASTER_ADDR / MASTER_PORT (a free localhost port) explicitly. Under SLURM one ``srun`` step
runs a task per rank across the job's nodes, with ``--kill-on-bad-exit`` so that one failing
rank ends the step. Either way, a rank that fails ends the others within ``grace_s`` seconds.
Standard library only.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from scalebench.launch.rank_entry import end_with_parent

POLL_S = 0.2


def free_port() -> int:
    """A TCP port free on localhost right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_entry_args(folder: Path, benchmark: Path, config: Path) -> list[str]:
    return ["-m", "scalebench.launch.rank_entry", "--folder", str(folder), "--benchmark",
            str(benchmark), "--config", str(config)]


def local_rank_env(rank: int, nproc: int, port: int) -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def srun_command(python: list[str], folder: Path, benchmark: Path, config: Path,
                 srun_args: list[str]) -> list[str]:
    """The srun step of one experiment: one task per rank over the whole allocation."""
    return ["srun", "--kill-on-bad-exit=1", "--export=ALL", *srun_args, *python,
            *rank_entry_args(folder, benchmark, config), "--from-slurm"]


@dataclass
class RankGroup:
    """Processes of one experiment (N local ranks or one srun step)."""

    processes: list[subprocess.Popen]
    grace_s: float = 10.0

    def signal(self, signum: int) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signum)

    def wait(self) -> list[int]:
        """Exit statuses; once one process fails, the others get SIGTERM after ``grace_s``
        (a rank blocked in a collective with a dead peer) and SIGKILL ``grace_s`` later."""
        term_at = kill_at = math.inf
        while any(p.poll() is None for p in self.processes):
            now = time.monotonic()
            if kill_at == math.inf and any(p.poll() not in (None, 0) for p in self.processes):
                term_at, kill_at = now + self.grace_s, now + 2 * self.grace_s
            if now >= term_at:
                self.signal(signal.SIGTERM)
                term_at = math.inf
            if now >= kill_at:
                self.signal(signal.SIGKILL)
            time.sleep(POLL_S)
        return [p.returncode for p in self.processes]


def start_local(python: list[str], nproc: int, folder: Path, benchmark: Path,
                config: Path) -> RankGroup:
    """``nproc`` rank processes on this machine, each in its own process group."""
    port = free_port()
    processes = [
        subprocess.Popen([*python, *rank_entry_args(folder, benchmark, config)],
                         env={**os.environ, **local_rank_env(rank, nproc, port)},
                         start_new_session=True, preexec_fn=end_with_parent)
        for rank in range(nproc)
    ] if nproc > 1 else [
        subprocess.Popen([*python, *rank_entry_args(folder, benchmark, config)],
                         start_new_session=True, preexec_fn=end_with_parent)
    ]
    return RankGroup(processes)


def start_srun(python: list[str], folder: Path, benchmark: Path, config: Path,
               srun_args: list[str], port: int) -> RankGroup:
    """One srun step for the experiment; the job's nodes and tasks come from SLURM."""
    env = {**os.environ, "MASTER_PORT": str(port), "SB_TASK_RANKS": "1"}
    env.setdefault("MASTER_ADDR", first_node_address())
    process = subprocess.Popen(srun_command(python, folder, benchmark, config, srun_args),
                               env=env, start_new_session=True, preexec_fn=end_with_parent)
    return RankGroup([process], grace_s=30.0)


def first_node_address() -> str:
    """NodeAddr of the job's first node (names may not resolve), else 127.0.0.1."""
    nodes = os.environ.get("SLURM_JOB_NODELIST", "")
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
