"""A launch stopped by a full, over-quota or read-only file system: which write failed, and the
one line that says so, what the published file holds and the command that goes on.

Such a fault stops the launch at once (``runner``): every later experiment would fail the
same way, each leaving tracebacks and no rows. A rank tells it by its exit status
(``EXIT_STORAGE_FULL``: its log or its failure note could not be written) or by the error line
of its note (benchopt could not write its rows or a cache entry); the launcher's own writes
and its children's tell it as a StorageFull. Standard library only, as the whole launcher.
"""

from __future__ import annotations

import re
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from scalebench.errors import (
    EXIT_STORAGE_FULL,
    STORAGE_ERROR_LINE,
    ScalebenchError,
    StorageFull,
    storage_full,
)
from scalebench.launch.failures import error_line, rank_notes

EXCEPTION_NAME = re.compile(r"^[\w.]*(Error|Exception): ")  # "OSError: [Errno 28] ..."


def rank_storage_fault(folder: Path, position: str, identifier: str, statuses: list[int],
                       per_rank: bool, final: Path) -> StorageFull | None:
    """The fault of experiment ``position`` (k/N) ``identifier`` (staging ``folder``, results
    file ``final``) whose processes ended with ``statuses`` (process r is rank r when
    ``per_rank``; else one srun step), when one of its ranks could not write; else None."""
    label = f"experiment {position} ({identifier})"
    for note in rank_notes(folder):
        error = EXCEPTION_NAME.sub("", error_line(note["log_tail"]))
        if STORAGE_ERROR_LINE.search(error):
            log = final.with_suffix("") / "logs" / f"{identifier}.rank{note['rank']}.log"
            return StorageFull(f"rank {note['rank']} of {label} could not write ({error}; "
                               f"log: {log})")
    if EXIT_STORAGE_FULL in statuses:
        rank = f"rank {statuses.index(EXIT_STORAGE_FULL)}" if per_rank else "a rank"
        return StorageFull(f"{rank} of {label} could not write its log or its rows in "
                           f"{final.parent} (no space left, quota reached or read-only)")
    return None


def stopped_launch(error: StorageFull | OSError, final: Path, total: int, argv: list[str],
                   published: Callable[[], dict]) -> StorageFull:
    """The launch's one-line error once a file system refused a write (``error``): the
    fault, what ``final`` holds (``published()``: its run status and rows) out of ``total``
    experiments (0: not known yet) and the command that goes on; a traceback stays in a
    log."""
    fault = error if isinstance(error, StorageFull) else storage_full(error)
    record = published() if final.is_file() else None
    return StorageFull(stopped_message(fault, final, record, total or None, argv))


def stopped_message(fault: StorageFull, final: Path, record: dict | None,
                    total: int | None, argv: list[str]) -> str:
    """The launch's one line: the fault, what ``final`` holds (``record``: its run status
    and rows, None when nothing was published), and the command that goes on (``argv``: the
    launch's arguments after the program, e.g. ``["run", CONFIG, ...]``)."""
    of_total = f" of {total}" if total else ""
    if record is None:
        held = f"no experiment finished, {final} was not written"
        then = f"run again with: {go_on_command(argv, final, resume=False)}"
    else:
        held = (f"{final} holds {len(record.get('experiments', []))}{of_total} "
                f"experiment(s), {record.get('rows', 0)} rows, {record.get('status')}")
        then = f"resume with: {go_on_command(argv, final, resume=True)}" \
            if record.get("status") == "partial" else \
            f"write its report with: scalebench report {shlex.quote(str(final))}"
    return f"{fault}; {held}; free space, then {then}"


def go_on_command(argv: list[str], final: Path, resume: bool) -> str:
    """The launch's command (``argv``: its arguments after the program) with its result's
    folder and name pinned (a default name holds the date): ``final``'s to ``resume``, else a
    free one."""
    kept, skip = [], False
    for argument in argv:
        if skip:
            skip = False
        elif argument in ("--output", "--outputs"):
            skip = True
        elif not argument.startswith(("--output=", "--outputs=")) and argument != "--resume":
            kept.append(argument)
    name = final.stem if resume else free_name(final)
    pinned = [*kept, "--output", name, "--outputs", str(final.parent)]
    return shlex.join([*program(), *pinned, *(["--resume"] if resume else [])])


def free_name(final: Path) -> str:
    """A result name beside ``final`` that no file or folder holds yet: a launch that
    published nothing still kept its logs under its own name."""
    number = 2
    while any(taken.exists() for taken in (final.with_name(f"{final.stem}_{number}.parquet"),
                                           final.with_name(f"{final.stem}_{number}"))):
        number += 1
    return f"{final.stem}_{number}"


def program() -> list[str]:
    """How this process was started: ``scalebench`` (the entry point, as typed) or
    ``python -m scalebench``."""
    started = sys.argv[0] if sys.argv and sys.argv[0] else "scalebench"
    if Path(started).name == "scalebench":
        return [started]
    return [sys.executable, "-m", "scalebench"]


def check_writable_folder(folder: Path, what: str) -> None:
    """Refuse a results folder that cannot be written (read-only, not a folder, no
    permission), creating nothing: a probe file goes into the folder, or into its nearest
    existing parent when it is still to be made, and is removed at once."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, "not a directory")
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as error:
        raise ScalebenchError(f"{what} folder {folder} cannot be written ({existing}: "
                              f"{error.strerror or error}); choose a writable folder") from None
