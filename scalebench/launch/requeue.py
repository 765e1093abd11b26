"""Self-requeue under SLURM: a launch its allocation cannot finish requeues its own batch job,
and the next start resumes (``resume``).

Why a launch requeues (``Cut``): a node lost or a rank found hung (the launch stops:
``LaunchState.lost``; that node is excluded), the next experiment's predicted time with
``TIME_MARGIN`` does not fit the time the job has left before its limit's signal may come
(``time_left_s`` from squeue, less ``durations.before_limit_signal_s``'s window), or that
signal itself (the templates' ``--signal=B:TERM@30``, the last resort; a SIGTERM long before
the limit is a person's scancel, and stops the launch as before). ``requeue`` runs
``scontrol requeue``, says so at once (the requeue ends this process within SLURM's
KillWait), then sets the excluded nodes on the job, now pending (SLURM refuses them on a
running job); where that cannot be set, the record beside the result
(``RECORD_NAME``) names them and a start on one of them requeues again before any experiment
(``start_on_excluded``). The launcher's own requeues of a job are bounded by the restart limit
(the ``restart-limit`` config key or ``--restart-limit``) and recorded in the result's run
status (``Requeues.to_json``); a requeue for the time limit after an allocation that finished
an experiment makes progress and is not counted against it (``continued``), so a campaign
spans as many allocations as it needs while one that cannot advance stops. Where requeue
is not allowed (refused, ``--no-requeue``), or the limit is reached, the line says what to
type. Every SLURM client call goes through a
``SlurmCall`` so that the rules can be fed canned replies. Standard library only, as the
whole launcher.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from scalebench.durations import TIME_MARGIN, before_limit_signal_s
from scalebench.errors import ScalebenchError

# A SLURM client command (argv) -> its exit status and its output (stdout and stderr).
SlurmCall = Callable[[list[str]], tuple[int, str]]
RECORD_NAME = "requeues.json"  # in the result's folder (beside its logs)
# How long to retry setting the excluded nodes after the requeue: the job turns pending at
# once, but its processes (this one) are being ended within SLURM's KillWait (30 s default).
EXCLUDE_TRIES, EXCLUDE_PAUSE_S = 20, 0.5
# A SIGTERM this close to the job's end is the templates' limit signal, not a person's
# scancel: the launch requeues instead of ending. The signal comes durations'
# LIMIT_SIGNAL_LEAD_S before the end, up to LIMIT_SIGNAL_EARLY_S sooner (90 s in all); the
# window is wider for the scheduler's own delays and a slow squeue.
LIMIT_SIGNAL_S = 300.0


def slurm_call(command: list[str]) -> tuple[int, str]:
    """Run a SLURM client command: its exit status and output (127: not installed)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              check=False)
    except FileNotFoundError:
        return 127, f"{command[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{command[0]}: no answer within 60 s"
    return done.returncode, (done.stdout + done.stderr).strip()


def restart_limit_value(text: str | int, where: str) -> int:
    """A restart limit: a whole number of at least 0; ScalebenchError (one line) otherwise."""
    value = str(text).strip()
    if not value.isdigit():
        raise ScalebenchError(f"{where}: {text!r} is not a restart limit (give a whole number "
                              f"of at least 0: how many times a launch may requeue itself)")
    return int(value)


@dataclass
class Requeues:
    """A batch job's requeues by the launcher: how many count against the restart limit,
    how many continued a campaign past a time limit (not counted), the nodes to exclude,
    and why (each requeue's reason, in order)."""

    job: str
    count: int = 0
    limit: int = 0
    exclude: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    continued: int = 0

    def to_json(self) -> dict:
        return asdict(self)


def read_requeues(folder: Path, job: str) -> Requeues:
    """The record of ``job``'s requeues in ``folder``; none for another job's (a new
    submission starts its count again)."""
    try:
        record = json.loads((folder / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return Requeues(job)
    if not isinstance(record, dict) or record.get("job") != job:
        return Requeues(job)
    return Requeues(job, int(record.get("count", 0)), int(record.get("limit", 0)),
                    list(record.get("exclude", [])), list(record.get("reasons", [])),
                    int(record.get("continued", 0)))


def write_requeues(folder: Path, record: Requeues) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RECORD_NAME).write_text(json.dumps(record.to_json()))


@dataclass(frozen=True)
class Cut:
    """Why this allocation cannot finish the launch: ``why`` (a line's words), the node
    to exclude (None: none), and whether it is the time limit's (a requeue that may continue
    a campaign: ``requeue``'s ``progressed``)."""

    why: str
    node: str | None = None
    time_limit: bool = False


def job_id(env: Mapping[str, str] = os.environ) -> str | None:
    """This batch job's id; None outside a SLURM job."""
    return env.get("SLURM_JOB_ID") or None


def requeue(cut: Cut, folder: Path, limit: int, say: Callable[[str], None],
            call: SlurmCall = slurm_call, env: Mapping[str, str] = os.environ,
            pause: Callable[[float], None] = time.sleep, progressed: bool = False) -> None:
    """Requeue this batch job for ``cut`` within ``limit`` requeues, excluding its node and
    those excluded before where nodes are left for the job; a time limit's cut after an
    allocation that finished an experiment (``progressed``) is not counted against the
    limit. ``say`` gets the line that says what was done, or what to type where it was not,
    as soon as it is true: the requeue ends this process within SLURM's KillWait, so the
    line is said before the excluded nodes are set (the record keeps them either way, and a
    start on one requeues again), and a second line only where SLURM would not take them."""
    job = job_id(env)
    by_hand = f"requeue the job to complete them (scontrol requeue {job or 'JOBID'})"
    if job is None:
        say(by_hand)
        return
    record = read_requeues(folder, job)
    counted = not (cut.time_limit and progressed)
    if counted and record.count >= limit:
        say(f"the restart limit is reached ({record.count} of {limit} requeues by "
            f"scalebench); {by_hand}")
        return
    exclude = [*record.exclude, *([cut.node] if cut.node and cut.node
                                  not in record.exclude else [])]
    note = ""
    if exclude and not _nodes_left(exclude, call, env):
        note = f"; no node left to run on without {','.join(exclude)}: requeued without " \
               f"excluding any"
        exclude = []
    updated = Requeues(job, record.count + counted, limit, exclude, [*record.reasons, cut.why],
                       record.continued + (not counted))
    write_requeues(folder, updated)  # before the requeue: this process is ended soon after
    status, output = call(["scontrol", "requeue", job])
    if status != 0:
        write_requeues(folder, record)
        say(f"SLURM refused to requeue the job ({output or f'exit status {status}'}); "
            f"{by_hand}")
        return
    counted_text = f"{updated.count} of {limit} requeues by scalebench" if counted else \
        f"the time limit's, after finished experiments: not counted against the limit of " \
        f"{limit}"
    excluded = f", excluding {','.join(exclude)}" if exclude else ""
    say(f"requeued job {job} ({counted_text}){excluded}{note}; the next start resumes")
    if exclude and not exclude_nodes(job, exclude, call, pause):
        say(f"SLURM did not take the exclusion of {','.join(exclude)} for job {job}, so a "
            f"start on {'it' if len(exclude) == 1 else 'one of them'} requeues again")


def exclude_nodes(job: str, nodes: list[str], call: SlurmCall,
                  pause: Callable[[float], None]) -> bool:
    """Set ``nodes`` as the excluded nodes of ``job``, retried until it is pending (SLURM
    refuses them on a running job); whether it was set."""
    for _ in range(EXCLUDE_TRIES):
        status, _ = call(["scontrol", "update", f"JobId={job}", f"ExcNodeList={','.join(nodes)}"])
        if status == 0:
            return True
        pause(EXCLUDE_PAUSE_S)
    return False


def start_on_excluded(folder: Path, call: SlurmCall = slurm_call,
                      env: Mapping[str, str] = os.environ) -> Cut | None:
    """Why this start must requeue before any experiment: it runs on a node an earlier
    requeue of the job excluded but could not keep it from; None otherwise."""
    job = job_id(env)
    if job is None:
        return None
    exclude = set(read_requeues(folder, job).exclude)
    on = exclude.intersection(job_nodes(call, env))
    if not on:
        return None
    return Cut(f"this start runs on {','.join(sorted(on))}, which an earlier requeue "
               f"excluded")


def job_nodes(call: SlurmCall, env: Mapping[str, str]) -> list[str]:
    """The node names of this job's allocation."""
    nodes = env.get("SLURM_JOB_NODELIST", "")
    if not nodes:
        return []
    status, output = call(["scontrol", "show", "hostnames", nodes])
    return output.split() if status == 0 else []


def _nodes_left(exclude: list[str], call: SlurmCall, env: Mapping[str, str]) -> bool:
    """Whether the job's partition has enough nodes for it without ``exclude``."""
    partition = env.get("SLURM_JOB_PARTITION", "")
    status, output = call(["sinfo", "-h", "-N", "-o", "%N", *(["-p", partition] if partition
                                                              else [])])  # one node a line
    if status != 0:
        return True  # unknown: the exclusion is tried, SLURM holds the job if none fits
    needed = int(env.get("SLURM_JOB_NUM_NODES", "1") or 1)
    return len(set(output.split()) - set(exclude)) >= needed


def time_left_s(call: SlurmCall = slurm_call, env: Mapping[str, str] = os.environ,
                now: float | None = None) -> float | None:
    """Seconds until this job's end time (squeue's %e); None outside a job or without a
    limit."""
    job = job_id(env)
    if job is None:
        return None
    status, output = call(["squeue", "-h", "-j", job, "-o", "%e"])
    try:
        end = datetime.fromisoformat(output.strip()).timestamp()
    except ValueError:  # "N/A", "Unknown": no time limit
        return None
    return end - (time.time() if now is None else now) if status == 0 else None


def time_cut(predicted_s: float | None, left_s: float | None, label: str) -> Cut | None:
    """Why the experiment ``label`` should not start with ``left_s`` seconds left before the
    job's time limit: its predicted time (every repetition) with ``TIME_MARGIN`` does not fit
    the time before the limit's signal may come; None where it fits or either is unknown."""
    if predicted_s is None or left_s is None:
        return None
    needed, usable = predicted_s * TIME_MARGIN, before_limit_signal_s(left_s)
    if needed <= usable:
        return None
    return Cut(f"experiment {label} is predicted to need {needed:.0f} s with the margin, "
               f"more than the {max(usable, 0):.0f} s the job has before its time limit's "
               f"signal may come", time_limit=True)


def limit_signal(left_s: float | None) -> bool:
    """Whether a SIGTERM with ``left_s`` seconds left in the job is its time limit's."""
    return left_s is not None and left_s <= LIMIT_SIGNAL_S


def restart_limit(given: int | None, experiments: list[dict]) -> int:
    """--restart-limit (``given``), else the config's ``restart-limit`` (expand gives it to
    every experiment); 0 where there is neither (nothing was expanded)."""
    if given is not None:
        return given
    return next((int(e["restart_limit"]) for e in experiments if "restart_limit" in e), 0)


def at_start(folder: Path, call: SlurmCall = slurm_call,
             env: Mapping[str, str] = os.environ) -> tuple[dict | None, Cut | None]:
    """At a launch's start in a batch job: its earlier requeues by the launcher (for the run
    status; None before the first) and why it must requeue at once (``start_on_excluded``)."""
    record = read_requeues(folder, job_id(env) or "")
    return (record.to_json() if record.count or record.continued else None), \
        start_on_excluded(folder, call, env)


def experiment_cut(experiment: dict, call: SlurmCall = slurm_call,
                   env: Mapping[str, str] = os.environ) -> Cut | None:
    """Why ``experiment`` (an expanded one, with its ``predicted`` times)
    should not start in the time this job has left (``time_cut``); None where it fits or
    is not predicted."""
    predicted_s = (experiment.get("predicted") or {}).get("experiment_s")
    if predicted_s is None or job_id(env) is None:
        return None
    return time_cut(predicted_s, time_left_s(call, env), experiment["label"])


def after_launch(cut: Cut | None, stopped_by: int | None, folder: Path, limit: int,
                 lost: bool, call: SlurmCall = slurm_call,
                 env: Mapping[str, str] = os.environ, progressed: bool = False) -> None:
    """At the end of a launch under srun: requeue for ``cut``, or for the time limit's
    SIGTERM (``stopped_by``), printing why (unless the ``lost`` line said it) and what was
    done; ``progressed``: this allocation finished an experiment."""
    if cut is None and stopped_by == signal.SIGTERM and limit_signal(time_left_s(call, env)):
        cut = Cut("the job's time limit is near (its SIGTERM)", time_limit=True)
    if cut is None:
        return
    if not lost:
        _say(f"stopping this allocation: {cut.why}")
    requeue(cut, folder, limit, _say, call, env, progressed=progressed)


def _say(line: str) -> None:
    print(f"[scalebench] {line}", file=sys.stderr, flush=True)
