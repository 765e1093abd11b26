"""One tuning study on disk: an optuna study in a journal file that every worker (a local
process or a SLURM task) appends to, so that several share one search and a tuning killed half
way continues where it stopped.

A worker that dies leaves its trial RUNNING in the journal; each worker keeps a heartbeat file
beside the journal, and a RUNNING trial whose worker's heartbeat is older than
``STALE_AFTER_S`` (or whose process is gone, on this host and in this PID namespace) is marked
failed when a worker
asks for a trial, so that ``--trials N`` counts only trials that ended (complete and
pruned) and none is redone.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scalebench.rank.trial_report import journal_storage, study_pruner

if TYPE_CHECKING:
    import optuna

# A worker's heartbeat is written every HEARTBEAT_S; one older than STALE_AFTER_S belongs to
# a dead worker (a stopped one too: its thread stops with it).
HEARTBEAT_S = 10.0
STALE_AFTER_S = 60.0
# The attribute a trial's worker records on it: which heartbeat file vouches for it.
WORKER_ATTRIBUTE = "scalebench_worker"


@dataclass(frozen=True)
class StudyFiles:
    """Where a study lives: its journal and its workers' heartbeats."""

    folder: Path
    name: str

    @property
    def journal(self) -> Path:
        return self.folder / f"{self.name}.journal"

    @property
    def heartbeats(self) -> Path:
        return self.folder / f"{self.name}.workers"


def open_study(files: StudyFiles, seed: int, worker: int) -> optuna.Study:
    """The study in ``files`` (created on first use), maximising, sampled by a Gaussian
    process (scalebench.tuning.sampler) seeded per worker (two workers with one seed would
    suggest the same first settings) and pruned by the percentile rule on the trials'
    intermediate values."""
    import optuna

    from scalebench.tuning.sampler import PrunedAwareSampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    files.folder.mkdir(parents=True, exist_ok=True)
    return optuna.create_study(
        study_name=files.name, storage=journal_storage(files.journal), direction="maximize",
        sampler=PrunedAwareSampler(seed + worker),
        pruner=study_pruner(),
        load_if_exists=True)


def ended_trials(study: optuna.Study) -> int:
    """Trials that ended by the search's rule: complete or pruned (failed ones are not
    counted: ``--trials N`` asks for N judged settings)."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False,
                                states=(TrialState.COMPLETE, TrialState.PRUNED)))


class Heartbeat:
    """This worker's heartbeat: a file touched every HEARTBEAT_S by a daemon thread while the
    worker lives."""

    def __init__(self, files: StudyFiles) -> None:
        files.heartbeats.mkdir(parents=True, exist_ok=True)
        self.name = worker_name(os.getpid())
        self.path = files.heartbeats / self.name
        self._stop = threading.Event()
        self._beat()
        self._thread = threading.Thread(target=self._run, daemon=True, name="heartbeat")
        self._thread.start()

    def _beat(self) -> None:
        self.path.write_text(json.dumps({"time": time.time()}))

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self._beat()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.path.unlink(missing_ok=True)


def pid_namespace() -> str:
    """This process's PID namespace (a container without the host's has its own, whose pids
    repeat those of other containers on the node); "0" where there is no /proc."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def worker_name(pid: int) -> str:
    """The name a worker's heartbeat and trials carry: ``<host>-<pid namespace>-<pid>``,
    unique on a node whose workers run in containers of their own too."""
    return f"{socket.gethostname()}-{pid_namespace()}-{pid}"


def process_alive(worker: str) -> bool:
    """Whether the worker named by ``worker_name`` may live: on another host or in another
    PID namespace, unknown (its heartbeat decides); in this one, whether its process
    exists."""
    host, namespace, pid = (["", "", ""] + worker.rsplit("-", 2))[-3:]
    if host != socket.gethostname() or namespace != pid_namespace() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def fail_stale_trials(study: optuna.Study, files: StudyFiles, now: float | None = None) -> int:
    """Mark failed the RUNNING trials whose worker's heartbeat is missing or older than
    STALE_AFTER_S (a worker killed half way); return how many."""
    from optuna.trial import TrialState

    now = time.time() if now is None else now
    failed = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get(WORKER_ATTRIBUTE)
        if worker is None:  # asked for a moment ago, its worker not yet recorded
            started = trial.datetime_start.timestamp() if trial.datetime_start else now
            alive = now - started <= STALE_AFTER_S
        else:
            beat = files.heartbeats / worker
            alive = beat.is_file() and now - beat.stat().st_mtime <= STALE_AFTER_S \
                and process_alive(worker)
        if not alive:
            study.tell(trial.number, state=TrialState.FAIL)
            failed += 1
    return failed
