"""One rank of one experiment: runs benchopt on the experiment's config, logs, reports failure.

Standard library only: it is the light parent of the rank's benchopt process. Rank 0 writes
``<dir>/result.parquet``; rank r > 0 writes under ``<dir>/rank<r>/``, which the launcher
keeps only for per-rank artefacts (profiler traces), so nothing it writes can be mistaken for
results. Every rank logs to ``<dir>/rank<r>.log`` (rank 0 also to its standard output); a
rank that fails writes ``<dir>/rank<r>.failed`` (JSON: rank, host, exit status, log tail).
SIGTERM / SIGINT are passed on to benchopt.

``--from-slurm`` takes RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE from SLURM's task
variables (srun sets them per task) unless RANK is already set (slurm_templates/task-python.sh
maps them itself, since a clean container environment has no SLURM_* variables).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

LOG_TAIL_LINES = 80


def end_with_parent() -> None:
    """In a child process (preexec_fn): receive SIGTERM when its parent dies, even by SIGKILL,
    so that no rank outlives its launcher. Linux only; elsewhere a no-op."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def slurm_ranks(env: dict[str, str]) -> dict[str, str]:
    """RANK & co. from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE."""
    per_node = env.get("SLURM_NTASKS_PER_NODE", "") or env.get("SLURM_TASKS_PER_NODE", "1")
    return {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": env["SLURM_NTASKS"],
            "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
            "LOCAL_WORLD_SIZE": per_node.split("(")[0].split(",")[0]}


def result_path(folder: Path, rank: int) -> Path:
    """Where a rank's benchopt writes its parquet: only rank 0's is a result."""
    return folder / "result.parquet" if rank == 0 else folder / f"rank{rank}" / "result.parquet"


def benchopt_command(python: list[str], benchmark: Path, config: Path, output: Path) -> list[str]:
    return [*python, "-m", "benchopt", "run", str(benchmark), "--config", str(config),
            "--no-plot", "--no-display", "--no-cache", "--output", str(output)]


def run_rank(folder: Path, benchmark: Path, config: Path, env: dict[str, str]) -> int:
    rank = int(env.get("RANK", "0"))
    output = result_path(folder, rank)
    output.parent.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"rank{rank}.log"
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    # Fail fast: benchopt stops at the first error instead of skipping it silently.
    child_env = {**env, "BENCHOPT_RAISE_ON_ERROR": "true", "PYTHONUNBUFFERED": "1"}
    command = benchopt_command([sys.executable], benchmark, config, output)
    with log_path.open("w") as log:
        process = subprocess.Popen(command, env=child_env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace",
                                   preexec_fn=end_with_parent)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, _: process.send_signal(signum))
        for line in process.stdout:
            log.write(line)
            tail.append(line.rstrip("\n"))
            if rank == 0:
                sys.stdout.write(line)
                sys.stdout.flush()
        status = process.wait()
    if status != 0 or (rank == 0 and not output.is_file()):
        # failed_at tells the root cause from its consequences (peers losing a collective).
        note = {"rank": rank, "host": socket.gethostname(), "exit_status": status,
                "failed_at": time.time(), "log_tail": list(tail)}
        (folder / f"rank{rank}.failed").write_text(json.dumps(note))
        return status or 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one rank of one experiment")
    parser.add_argument("--folder", type=Path, required=True, help="the experiment's folder")
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True, help="one-experiment config")
    parser.add_argument("--from-slurm", action="store_true",
                        help="take the ranks from SLURM's task variables")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    if args.from_slurm and "RANK" not in env:
        env.update(slurm_ranks(env))
    return run_rank(args.folder, args.benchmark, args.config, env)


if __name__ == "__main__":
    sys.exit(main())
