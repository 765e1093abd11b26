"""What went wrong with a failed experiment: the rank that failed first, how it ended, and the
one line the launcher prints and records for it.

A rank that fails leaves a note (``<folder>/rank<r>.failed``, written by ``rank_entry``: its
exit status, when benchopt ended, whether it was signalled, where its run was, its log's tail);
a local rank killed with its wrapper leaves none, only its process's exit status; an srun
rank whose processes died with their node leaves only the note it wrote when it started
(``rank<r>.started``: it never reported its end). Of all these,
the cause is the earliest failure that is not a consequence of another: a rank whose peer died
(gloo, NCCL) or that ended once the launcher had stopped the ranks failed because of the first;
a rank that never reported its end comes after a rank that reported its own failure (srun may
have killed it), before the consequences. A rank the launcher found hung (``liveness``) is the
cause whatever the others' notes say: they were stopped because of it.
Standard library only, as the whole launcher.
"""

from __future__ import annotations

import json
import math
import re
import signal
import socket
from pathlib import Path

from provenance.stop_reasons import FAILED, STOPPED, progress_stop
from scalebench.launch.processes import RankGroup

EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception|Interrupt|Exit)\b.*:")
RANK_PREFIX = re.compile(r"^\s*\[rank\d+\]:")
# Errors of a rank whose peer died first (gloo, NCCL): consequences, not causes.
LOST_PEER = re.compile(r"Connection (closed|reset) by peer|remote process exited|"
                       r"communicator was aborted|Broken pipe")


def experiment_failure(folder: Path, experiment: dict, group: RankGroup,
                       per_rank: bool) -> dict:
    """The rank that failed first, its host and how (``error``): from the ranks' notes and,
    when ``per_rank`` (local ranks: process r is rank r), from the processes that ended
    without a note (killed with their wrapper). A rank that lost a peer, or that ended once
    the launcher had stopped the ranks, failed in consequence and comes after the others."""
    failure = {"experiment": experiment["id"], "label": experiment["label"]}
    if group.hung is not None:  # the others were stopped because of it
        hung = group.hung
        return {**failure, "rank": hung.rank, "host": hung.host,
                "error": f"hung: {hung.why}, on {hung.host}"}
    candidates = []  # (consequence, time, rank, host, how)
    notes = rank_notes(folder)
    for note in notes:
        error = error_line(note["log_tail"])
        consequence = note.get("signalled", False) or bool(LOST_PEER.search(error)) \
            or note["failed_at"] >= group.signalled_at
        candidates.append((consequence, note["failed_at"], note["rank"], note["host"],
                           noted_how(note, error)))
    noted = {note["rank"] for note in notes}
    if not per_rank:  # local ranks: their exit statuses below say how they ended
        candidates += _unreported(folder, noted)
    statuses = [process.returncode for process in group.processes]
    for rank, (status, ended) in enumerate(zip(statuses, group.ended_at, strict=True)):
        if per_rank and status != 0 and rank not in noted:
            ended = math.inf if ended is None else ended
            candidates.append((ended >= group.signalled_at, ended, rank,
                               socket.gethostname(), exit_how(status)))
    if not candidates:
        return {**failure, "rank": None, "error": f"exit statuses {statuses}"}
    _, _, rank, host, how = min(candidates)
    return {**failure, "rank": rank, "host": host, "error": f"{how}, on {host}"}


def unfinished_stop(folder: Path, stopped: bool) -> dict:
    """How an experiment that kept no rows ended, for the run status: failed, or ``stopped``
    by the launch's signal, at the iteration its rank 0 (else its first rank with a note)
    had reached."""
    notes = rank_notes(folder)
    progress = next((n for n in notes if n["rank"] == 0), notes[0] if notes else {})
    return progress_stop(STOPPED if stopped else FAILED, progress.get("progress", "")).to_json()


def rank_notes(folder: Path) -> list[dict]:
    """The failure notes the ranks of an experiment left in ``folder``, by rank."""
    notes = [json.loads(path.read_text()) for path in folder.glob("rank*.failed")]
    return sorted(notes, key=lambda note: note["rank"])


def _unreported(folder: Path, noted: set[int]) -> list[tuple]:
    """Candidates for the ranks that started and never reported their end (no failure note,
    their start note still there): their node was lost or their processes killed."""
    found = []
    for path in folder.glob("rank*.started"):
        started = json.loads(path.read_text())
        if started["rank"] not in noted:
            found.append((False, math.inf, started["rank"], started["host"],
                          "never reported its end (its node lost, or its processes killed)"))
    return found


def lost_step_message(failure: dict, group: RankGroup, final: Path) -> str:
    """The line that stops a launch whose srun step did not end ``grace_s`` after a rank's
    failure, or had a hung rank: the node and rank and what the results file keeps (the
    requeue's line, scalebench.launch.requeue, says how it is completed)."""
    where = "a rank" if failure["rank"] is None else \
        f"rank {failure['rank']} on {failure['host']}"
    why = group.hung.text() if group.hung is not None else \
        f"the srun step of {where} did not end within {group.grace_s:.0f} s of the first " \
        f"failure (its node lost?)"
    kept = f"the experiments finished so far are in {final}" if final.is_file() \
        else "no experiment was published"
    return (f"[scalebench] stopped: {why}, so no further experiment starts on this "
            f"allocation; {kept}")


def failure_message(failure: dict, position: str, log: Path) -> str:
    """The line the launcher prints when experiment ``position`` (k/N) fails."""
    return (f"[scalebench] FAILED experiment {position} {failure['label']} "
            f"(rank {failure['rank']}): {failure['error']}; log: {log}")


def exit_how(status: int) -> str:
    """``killed by SIGKILL`` or ``exited with status 3``."""
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exited with status {status}"


def noted_how(note: dict, error: str) -> str:
    """How a rank with a failure note ended: its signal or exit status, where its run was,
    and the exception it raised."""
    where = note.get("progress", "")
    if note["exit_status"] == 0:
        return f"ended {where} without writing its result file".replace("  ", " ")
    how = exit_how(note["exit_status"]) + (f" {where}" if where else "")
    return f"{how}: {error}" if error and note["exit_status"] > 0 else how


def error_line(lines: list[str]) -> str:
    """The last exception line of a traceback (``SomeError: message``), else the last line;
    without the ``[rank<r>]:`` that torch puts before the lines of a distributed process."""
    lines = [RANK_PREFIX.sub("", line).strip() for line in lines]
    for line in reversed(lines):
        if EXCEPTION_LINE.match(line):
            return line
    return next((line for line in reversed(lines) if line), "")
