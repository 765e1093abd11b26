"""Starting the ranks of one experiment and waiting for them, locally or through srun.

Locally, ``nproc`` processes get RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE /
MASTER_ADDR / MASTER_PORT (a free localhost port outside the ephemeral range) explicitly.
Under SLURM one ``srun`` step runs a task per rank across the job's nodes, with
``--kill-on-bad-exit`` so that one failing rank ends the step. Either way, a rank that fails
ends the others within ``grace_s`` seconds; under srun a rank's failure note starts that
wait too (a step whose lost node never reports its end would keep srun waiting). A rank that
``liveness`` finds hung (silent, or its progress stalled) is named at once and its step
stopped: SIGTERM with SIGCONT (a stopped process holds a pending SIGTERM), SIGKILL
``grace_s`` later. Standard library only.
"""

from __future__ import annotations

import errno
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scalebench.launch import liveness
from scalebench.launch.rank_entry import end_with_parent
from scalebench.launch.rank_env import EXPERIMENT_PORT_SPAN, first_node_address, master_port

POLL_S = 0.2
# How long an srun step may take to end after one of its ranks failed: srun's own kill of the
# step (--kill-on-bad-exit) takes SLURM's KillWait at most (30 s by default).
SRUN_GRACE_S = 30.0


# The ports the kernel hands to outgoing connections as their source ports (Linux).
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
FIRST_PORT = 1024  # the lowest port a user's process may bind
PORT_TRIES = 64


def rendezvous_ports() -> range:
    """Ports no outgoing connection takes: those below the kernel's ephemeral range, or above
    it where little is left below (empty where the range is unknown)."""
    try:
        start, end = map(int, EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return range(0)
    below, above = range(FIRST_PORT, start), range(end + 1, 65536)
    return below if len(below) >= len(above) else above


def free_port() -> int:
    """A TCP port free on localhost now, for rank 0's rendezvous. Rank 0 binds it seconds
    later (after its imports): taken outside the ephemeral range, no connection opened
    meanwhile can take it as its source port."""
    ports = rendezvous_ports()
    for port in random.Random().sample(ports, min(PORT_TRIES, len(ports))):
        if port_is_free(port):
            return port
    with socket.socket() as probe:  # no free port found there: any free one
        probe.bind(("", 0))
        return probe.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Whether ``port`` can be bound on every address, IPv4 and, where there is IPv6, IPv6
    (rank 0's store listens on all of them)."""
    families = [(socket.AF_INET, "")] + ([(socket.AF_INET6, "::")] if socket.has_ipv6 else [])
    for family, everywhere in families:
        try:
            with socket.socket(family) as probe:
                probe.bind((everywhere, port))
        except OSError as error:
            if family == socket.AF_INET6 and \
                    error.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
                continue  # built with IPv6, running without it
            return False
    return True


def step_port(job_id: str | None, index: int,
              is_free: Callable[[int], bool] = port_is_free) -> int:
    """The rendezvous port of the launcher's ``index``-th srun step of a SLURM job
    (rank_env.master_port), else the next step offset's where that port is taken here: a
    requeued job keeps its id, so its steps get the ports of its previous start, where a rank
    that start left behind on this node (the batch host, where rank 0 runs) may still listen
    and would pair with the new ranks."""
    for attempt in range(EXPERIMENT_PORT_SPAN):
        port = master_port(job_id, (index + attempt) % EXPERIMENT_PORT_SPAN)
        if is_free(port):
            return port
    return master_port(job_id, index % EXPERIMENT_PORT_SPAN)


def rank_entry_args(folder: Path, benchmark: Path, config: Path,
                    position: str = "1/1") -> list[str]:
    return ["-m", "scalebench.launch.rank_entry", "--folder", str(folder), "--benchmark",
            str(benchmark), "--config", str(config), "--position", position]


def local_rank_env(rank: int, nproc: int, port: int) -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def srun_command(python: list[str], folder: Path, benchmark: Path, config: Path,
                 srun_args: list[str], position: str = "1/1") -> list[str]:
    """The srun step of one experiment: one task per rank over the whole allocation."""
    return ["srun", "--kill-on-bad-exit=1", "--export=ALL", *srun_args, *python,
            *rank_entry_args(folder, benchmark, config, position), "--from-slurm"]


@dataclass
class RankGroup:
    """Processes of one experiment (N local ranks, rank r the r-th, or one srun step)."""

    processes: list[subprocess.Popen]
    grace_s: float = 10.0
    # When each process was seen ended (time.time()), and when this group first signalled
    # them: what a rank did after that is a consequence, not a cause.
    ended_at: list[float | None] = field(default_factory=list)
    signalled_at: float = math.inf
    # The folder where ranks leave failure notes (rank<r>.failed), watched when one process
    # is the whole step (srun): a note is the only sign that one of its ranks failed.
    notes: Path | None = None
    forced: bool = False  # the group did not end by itself: the grace ran out, or hung
    watch: liveness.Watch | None = None  # its ranks' heartbeats and progress
    hung: liveness.Hung | None = None  # the rank the watch found hung

    def failed(self) -> bool:
        """Whether a process ended badly or, under srun, a rank left a failure note."""
        if any(p.poll() not in (None, 0) for p in self.processes):
            return True
        return self.notes is not None and any(self.notes.glob("rank*.failed"))

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every running process's group, and SIGCONT after it: a
        stopped process holds a pending signal until it runs again."""
        self.signalled_at = min(self.signalled_at, time.time())
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signum)
                if signum != signal.SIGKILL:
                    os.killpg(process.pid, signal.SIGCONT)

    def wait(self) -> list[int]:
        """Exit statuses; once one process (or rank) fails, the others get SIGTERM after
        ``grace_s`` (a rank blocked in a collective with a dead peer, an srun step waiting on
        a lost node) and SIGKILL ``grace_s`` later; a rank found hung is named on stderr
        and every process gets SIGTERM at once, SIGKILL ``grace_s`` later."""
        term_at = kill_at = math.inf
        self.ended_at = [None] * len(self.processes)
        while any(p.poll() is None for p in self.processes):
            self._note_ends()
            now = time.monotonic()
            if kill_at == math.inf and self.failed():
                term_at, kill_at = now + self.grace_s, now + 2 * self.grace_s
            if kill_at == math.inf and self._found_hung(now):
                term_at, kill_at = now, now + self.grace_s
            if now >= term_at:
                self.forced = True
                self.signal(signal.SIGTERM)
                term_at = math.inf
            if now >= kill_at:
                self.signal(signal.SIGKILL)
            time.sleep(POLL_S)
        self._note_ends()
        return [p.returncode for p in self.processes]

    def _found_hung(self, now: float) -> bool:
        """Whether the watch finds a rank hung (not once this group signalled its ranks:
        what they do then is a consequence)."""
        if self.watch is None or self.signalled_at != math.inf:
            return False
        self.hung = self.watch.verdict(now)
        if self.hung is not None:
            print(f"[scalebench] {self.hung.text()}; stopping its experiment", file=sys.stderr,
                  flush=True)
        return self.hung is not None

    def _note_ends(self) -> None:
        for index, process in enumerate(self.processes):
            if self.ended_at[index] is None and process.poll() is not None:
                self.ended_at[index] = time.time()


def start_local(python: list[str], nproc: int, folder: Path, benchmark: Path,
                config: Path, position: str = "1/1",
                bounds: liveness.Bounds | None = None) -> RankGroup:
    """``nproc`` rank processes on this machine, each in its own process group; ``bounds``:
    what makes one of them hung (None: not watched)."""
    port = free_port()
    command = [*python, *rank_entry_args(folder, benchmark, config, position)]
    env = {**os.environ, **_watched_variables(bounds)}
    processes = [
        subprocess.Popen(command, env={**env, **local_rank_env(rank, nproc, port)},
                         start_new_session=True, preexec_fn=end_with_parent)
        for rank in range(nproc)
    ] if nproc > 1 else [
        subprocess.Popen(command, env=env, start_new_session=True, preexec_fn=end_with_parent)
    ]
    return RankGroup(processes, watch=_watch(folder, bounds))


def start_srun(python: list[str], folder: Path, benchmark: Path, config: Path,
               srun_args: list[str], port: int, position: str = "1/1",
               bounds: liveness.Bounds | None = None) -> RankGroup:
    """One srun step for the experiment; the job's nodes and tasks come from SLURM."""
    env = {**os.environ, "MASTER_PORT": str(port), "SB_TASK_RANKS": "1",
           **_watched_variables(bounds)}
    env.setdefault("MASTER_ADDR", first_node_address())
    command = srun_command(python, folder, benchmark, config, srun_args, position)
    process = subprocess.Popen(command, env=env, start_new_session=True,
                               preexec_fn=end_with_parent)
    return RankGroup([process], grace_s=SRUN_GRACE_S, notes=folder,
                     watch=_watch(folder, bounds))


def _watched_variables(bounds: liveness.Bounds | None) -> dict[str, str]:
    return {} if bounds is None else liveness.rank_variables(bounds)


def _watch(folder: Path, bounds: liveness.Bounds | None) -> liveness.Watch | None:
    return None if bounds is None else liveness.Watch(folder, bounds)
