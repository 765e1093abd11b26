"""One rank of one experiment: runs benchopt on the experiment's config, logs, reports failure.

Standard library only: it is the light parent of the rank's benchopt process. Rank 0 writes
``<dir>/result.parquet``; rank r > 0 writes under ``<dir>/rank<r>/``, which the launcher
keeps only for per-rank artefacts (profiler traces), so nothing it writes can be mistaken for
results. Every rank logs to ``<dir>/rank<r>.log`` as the run goes (benchopt's output without
colour codes, and the rank's progress as plain lines); rank 0 shows its progress on its
standard output (``scalebench.launch.progress``), with the warnings and scalebench notes of
its run, but no traceback: those stay in the logs. A rank that fails writes
``<dir>/rank<r>.failed`` (JSON: rank, host, exit status, the signal that ended benchopt,
whether this process was itself signalled, where the run was, the log's tail). Its benchopt
process beats into ``<dir>/rank<r>.alive`` (``scalebench.launch.liveness``). While it runs,
``<dir>/rank<r>.started`` (rank, host, pid) says where: a note left behind is a rank that
never reported its end (its node lost, its processes killed). A write of its own (the log, the
notes) that a full, over-quota or read-only file system refuses ends the rank with
EXIT_STORAGE_FULL and no traceback; benchopt's (its rows, a cache) is in the note's tail.
SIGTERM / SIGINT are passed on to benchopt. Its benchopt process is a fresh interpreter, or
forked by the preloaded server its environment names (``scalebench.launch.preloaded``). The
host is the SLURM node's name under srun (SLURMD_NODENAME), else the machine's.

``--from-slurm`` takes RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE from SLURM's task
variables (srun sets them per task) unless RANK is already set (slurm_templates/task-python.sh
maps them itself, since a clean container environment has no SLURM_* variables).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import select
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

from provenance.files import write_text_atomically
from scalebench.errors import EXIT_STORAGE_FULL, is_storage_error
from scalebench.launch import liveness, preloaded, progress
from scalebench.launch.rank_env import slurm_ranks

LOG_TAIL_LINES = 80
TICK_S = 1.0  # the terminal's status line moves on at least this often
# Lines of benchopt's output rank 0 also shows: scalebench's notes and Python warnings.
NOTICE = re.compile(r"^(\[scalebench\] |\S+:\d+: \w*Warning: )")
LINE_END = re.compile(rb"\r\n|\r|\n")


def end_with_parent() -> None:
    """In a child process (preexec_fn): receive SIGTERM when its parent dies, even by SIGKILL,
    so that no rank outlives its launcher. Linux only; elsewhere a no-op."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def result_path(folder: Path, rank: int) -> Path:
    """Where a rank's benchopt writes its parquet: only rank 0's is a result."""
    return folder / "result.parquet" if rank == 0 else folder / f"rank{rank}" / "result.parquet"


def benchopt_arguments(benchmark: Path, config: Path, output: Path) -> list[str]:
    """The ``benchopt`` arguments of a rank's run."""
    return ["run", str(benchmark), "--config", str(config), "--no-plot", "--no-display",
            "--no-cache", "--output", str(output)]


def benchopt_command(python: list[str], benchmark: Path, config: Path, output: Path) -> list[str]:
    """``benchopt run`` through ``scalebench.benchopt_glue``'s start-up (the same arguments,
    less CPU: ``scalebench.rank.startup``)."""
    return [*python, "-m", "scalebench.benchopt_glue",
            *benchopt_arguments(benchmark, config, output)]


def rank_host(env: dict[str, str]) -> str:
    """The node a rank runs on: SLURM's name for it under srun, else the machine's name."""
    return env.get("SLURMD_NODENAME") or socket.gethostname()


def run_rank(folder: Path, benchmark: Path, config: Path, env: dict[str, str],
             position: str = "1/1") -> int:
    rank = int(env.get("RANK", "0"))
    output = result_path(folder, rank)
    output.parent.mkdir(parents=True, exist_ok=True)
    started = folder / f"rank{rank}.started"
    started.write_text(json.dumps({"rank": rank, "host": rank_host(env), "pid": os.getpid()}))
    try:
        return _run_benchopt(folder, benchmark, config, env, position)
    finally:
        started.unlink(missing_ok=True)  # this rank reported its end
        liveness.mark_ended(liveness.heartbeat_path(folder, rank))


def _run_benchopt(folder: Path, benchmark: Path, config: Path, env: dict[str, str],
                  position: str) -> int:
    """Run the rank's benchopt, relaying its output; its exit status, with a failure note
    when it failed."""
    rank = int(env.get("RANK", "0"))
    output = result_path(folder, rank)
    # Fail fast: benchopt stops at the first error instead of skipping it silently.
    child_env = {**env, "BENCHOPT_RAISE_ON_ERROR": "true", "PYTHONUNBUFFERED": "1",
                 progress.ENABLE_VARIABLE: "1",
                 liveness.HEARTBEAT_VARIABLE: str(liveness.heartbeat_path(folder, rank))}
    command = benchopt_command([sys.executable], benchmark, config, output)
    signalled: list[int] = []
    # Line-buffered: the log grows while the experiment runs.
    with (folder / f"rank{rank}.log").open("w", buffering=1) as log:
        reporter = progress.Reporter(position, rank, log, sys.stdout if rank == 0 else None)
        process = preloaded.start(command, child_env, preexec_fn=end_with_parent)

        def forward(signum: int, _frame: object) -> None:
            signalled.append(signum)
            process.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
        try:
            tail = relay(process.stdout, log, reporter)
        except OSError:
            process.terminate()  # its output can no longer be kept
            process.wait()
            raise
        status = process.wait()
        ended_at = time.time()
        succeeded = status == 0 and (rank != 0 or output.is_file())
        reporter.finish(succeeded)
    if not succeeded:
        # failed_at (when benchopt ended) and signalled tell the root cause from its
        # consequences (peers losing a collective, ranks the launcher stopped).
        note = {"rank": rank, "host": rank_host(env), "exit_status": status,
                "signal": signal.Signals(-status).name if status < 0 else None,
                "signalled": bool(signalled), "failed_at": ended_at,
                "progress": reporter.status.where(), "log_tail": tail}
        # whole or absent: a full file system must not leave a note the launcher cannot read
        write_text_atomically(folder / f"rank{rank}.failed", json.dumps(note))
        return status if 0 < status != EXIT_STORAGE_FULL else 1  # 3: only a full disk's
    return 0


def relay(stream: BinaryIO, log: TextIO, reporter: progress.Reporter) -> list[str]:
    """Copy benchopt's output into the log (without colour codes), hand its progress reports
    to ``reporter`` and its notices to the terminal; the last lines of output."""
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    for line in output_lines(stream, reporter.draw):
        text = progress.plain(line)
        event = progress.parse(text)
        if event is not None:
            reporter.report(event)
            continue
        log.write(text + "\n")
        tail.append(text)
        if NOTICE.match(text):
            reporter.notice(text)
    return list(tail)


def output_lines(stream: BinaryIO, tick: Callable[[], None]) -> Iterator[str]:
    """The lines of ``stream`` as they come (each ended by a newline, a carriage return or
    both), calling ``tick`` while none comes."""
    descriptor, pending = stream.fileno(), b""
    while True:
        if not select.select([descriptor], [], [], TICK_S)[0]:
            tick()
            continue
        chunk = os.read(descriptor, 1 << 16)
        if not chunk:
            break
        pending += chunk
        keep_cr = pending.endswith(b"\r")  # its \n may be in the next chunk
        *lines, pending = LINE_END.split(pending[:-1] if keep_cr else pending)
        pending += b"\r" if keep_cr else b""
        yield from (line.decode(errors="replace") for line in lines)
    if pending.rstrip(b"\r"):
        yield pending.rstrip(b"\r").decode(errors="replace")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one rank of one experiment")
    parser.add_argument("--folder", type=Path, required=True, help="the experiment's folder")
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True, help="one-experiment config")
    parser.add_argument("--from-slurm", action="store_true",
                        help="take the ranks from SLURM's task variables")
    parser.add_argument("--position", default="1/1",
                        help="k/N: the experiment's place in the launch (progress lines)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    if args.from_slurm and "RANK" not in env:
        env.update(slurm_ranks(env))
    try:
        return run_rank(args.folder, args.benchmark, args.config, env, args.position)
    except OSError as error:  # its log, its notes: the launcher prints the one line
        if not is_storage_error(error):
            raise
        return EXIT_STORAGE_FULL


if __name__ == "__main__":
    sys.exit(main())
