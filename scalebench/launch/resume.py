"""The resume rule: what an earlier launch left in a result file, and so what is left to run.

Used alike by ``--resume`` and by a requeued SLURM job: SLURM starts the batch script again
(after a preemption, a node failure or ``scontrol requeue``) with the same job id, so the same
result name, and ``SLURM_RESTART_COUNT`` set; that start resumes its own result by itself.
Another config's file is refused; a complete file has nothing left to run (exit 0, nothing
re-run); a partial file resumes its missing experiments. Standard library only, as the whole
launcher.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scalebench.errors import CommandFailed, ScalebenchError

ReadStatus = Callable[[Path], dict]  # a result file's run status (results.store.run_status)


@dataclass(frozen=True)
class Resumed:
    """What the earlier launches published: its finished experiments, and whether the run
    is complete (nothing left to run)."""

    experiments: frozenset[str]
    complete: bool = False


def slurm_restart() -> int:
    """How many times SLURM has restarted this batch job (requeued it: preemption, a node
    failure, ``scontrol requeue``); 0 outside a requeued job."""
    value = os.environ.get("SLURM_RESTART_COUNT", "").strip()
    return int(value) if value.isdigit() else 0


def finished_before(final: Path, config: Path, read_status: ReadStatus, resume: bool,
                    restart: int) -> Resumed:
    """The experiments earlier launches of ``config`` published in ``final``, for a launch
    with ``--resume`` (``resume``) or a requeued one (``restart`` > 0); a fresh launch
    refuses to overwrite an existing result. Refused (ScalebenchError, the file left as it
    is): another config's file, a file that is not a results file, an unknown status."""
    if not resume and not restart:
        for taken in (final, final.with_suffix("")):
            if taken.exists():
                raise ScalebenchError(f"result {taken} already exists; choose another "
                                      f"--output, or add --resume to complete a partial run")
        return Resumed(frozenset())
    who = f"restart {restart} of job {os.environ.get('SLURM_JOB_ID', '?')}" if restart \
        else "--resume"
    if not final.is_file():
        if not restart:  # --resume names the result of an interrupted run
            raise ScalebenchError(f"--resume: no result {final} to resume (give the --output "
                                  f"name of the interrupted run)")
        _say(f"{who}: no experiment was published before; running them all")
        return Resumed(frozenset())
    resumed = resumable(final, config, _status(final, read_status, who), who)
    if resumed.complete:
        _say(f"{who}: nothing to resume: {final} is complete ({len(resumed.experiments)} "
             f"experiment(s))")
    else:
        _say(f"{who}: resuming {final} ({len(resumed.experiments)} experiment(s) finished "
             f"before)")
    return resumed


def resumable(final: Path, config: Path, record: dict, who: str) -> Resumed:
    """The rule on ``final``'s run status ``record``: another config's file refused, a
    complete one has nothing left, a partial one its finished experiments. Files written
    before the config was recorded resume under any config."""
    written_by = record.get("config")
    if not same_config(written_by, config):
        raise ScalebenchError(f"{who}: result {final} holds config {written_by}, not "
                              f"{config}; give another --output (SB_OUTPUT in the SLURM "
                              f"templates), or run {written_by} to resume it")
    status = record.get("status")
    if status not in ("partial", "complete"):
        raise ScalebenchError(f"{who}: {final} has run status {status!r}, not 'partial' or "
                              f"'complete'; the file is left as it is")
    return Resumed(frozenset(record.get("experiments", [])), complete=status == "complete")


def same_config(written_by: str | None, config: Path) -> bool:
    """Whether what ``written_by`` (the config path it recorded) wrote belongs to ``config``:
    the same file, however named; what was written before configs were recorded belongs to
    any. The rule for result files (``resumable``) and tuning folders (scalebench.tuning)."""
    return not written_by or Path(written_by).resolve() == config.resolve()


def _status(final: Path, read_status: ReadStatus, who: str) -> dict:
    try:
        return read_status(final)
    except ScalebenchError as error:  # truncated, not parquet, not ours: left as it is
        if isinstance(error, CommandFailed):  # the reader itself broke: its own message
            raise
        raise ScalebenchError(f"{who}: {error}; the file is left as it is") from None


def _say(line: str) -> None:
    print(f"[scalebench] {line}", flush=True)
