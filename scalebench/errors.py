"""Errors and warnings the user sees, and the exit statuses of every scalebench command.

A ``ScalebenchError`` is bad input (exit 2): the message names what is wrong and what is
allowed. A ``CommandFailed`` is work that failed on good input (exit 1): a run with a failed
experiment, a download that does not match its manifest, an image that is another one. A
``StorageFull`` is a file that could not be written because its file system is full, over
quota or read-only (exit 3): no later work can succeed until the user frees space. The
CLI, the launcher's steps and the container helpers print either as ``scalebench: error:``
lines (``error_lines``) and exit with ``exit_status``. Warnings are ``scalebench: warning:``
lines on stderr, some of them once per process (``warn_once``).
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_STORAGE_FULL = 0, 1, 2, 3
# The write errors no retry can cure: a full file system, a quota reached, a read-only one.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
# The same errors as a traceback's last line gives them (Python's, pyarrow's "[errno 28]").
STORAGE_ERROR_LINE = re.compile(
    rf"\[errno ({'|'.join(str(number) for number in sorted(STORAGE_ERRNOS))})\]|"
    r"No space left on device|Disk quota exceeded|Read-only file system", re.I)
WARNING_PREFIX = "scalebench: warning: "
# What this process has warned about once (warn_once): only warn_once adds to it.
_WARNED: set[tuple] = set()


class ScalebenchError(Exception):
    """A user-facing error: the message names what is wrong and what is allowed."""


class CommandFailed(ScalebenchError):
    """The input was valid but the work failed; the message says what happened."""


class StorageFull(CommandFailed):
    """A file could not be written: its file system is full, over quota or read-only."""


def exit_status(error: ScalebenchError) -> int:
    """The exit status of a command that ended with ``error``."""
    if isinstance(error, StorageFull):
        return EXIT_STORAGE_FULL
    return EXIT_FAILED if isinstance(error, CommandFailed) else EXIT_BAD_INPUT


def is_storage_error(error: BaseException) -> bool:
    """Whether ``error`` is a write refused by a full, over-quota or read-only file system
    (pyarrow raises it as an OSError whose errno is set, or names it only in its text)."""
    return isinstance(error, OSError) and (
        error.errno in STORAGE_ERRNOS or bool(STORAGE_ERROR_LINE.search(str(error))))


def storage_full(error: OSError, what: str = "") -> StorageFull:
    """The one-line StorageFull for ``error``: what could not be written (``what``, else the
    error's file name) and why."""
    where = what or (f"cannot write {error.filename}" if error.filename else "cannot write")
    number = error.errno
    if number not in STORAGE_ERRNOS:  # pyarrow's errors may give it only in their text
        named = re.search(r"\[errno (\d+)\]", str(error), re.I)
        number = int(named.group(1)) if named else None
    reason = os.strerror(number) if number in STORAGE_ERRNOS else str(error).splitlines()[0]
    return StorageFull(f"{where}: {reason}")


class ConfigError(ScalebenchError):
    """An experiment configuration, parameter value or command-line argument is invalid."""


class MissingFileError(ScalebenchError):
    """A file the run needs (weights, data) is not where it was asked for."""


@contextmanager
def writing(what: str) -> Iterator[None]:
    """Run the block; a write in it that the file system refuses (full, quota, read-only)
    becomes a one-line StorageFull saying it cannot write ``what``."""
    try:
        yield
    except OSError as error:
        if not is_storage_error(error):
            raise
        raise storage_full(error, f"cannot write {what}") from None


def warn(message: str) -> None:
    """``message`` as a warning line on stderr."""
    print(WARNING_PREFIX + message, file=sys.stderr, flush=True)


def warn_once(key: tuple, message: str) -> None:
    """``warn(message)`` the first time this process meets ``key``, nothing after."""
    if key not in _WARNED:
        _WARNED.add(key)
        warn(message)


def error_lines(error: Exception) -> list[str]:
    """How the CLI prints an error: one ``scalebench: error:`` line per problem it names."""
    return [f"scalebench: error: {line}" for line in str(error).splitlines() or [""]]


def reported(call: Callable[[], int]) -> int:
    """``call()``'s exit status; a ScalebenchError, a write refused by a full or read-only
    file system, or an unreadable results file is printed as ``error_lines`` and ends in its
    exit status instead (anything else propagates)."""
    try:
        return call()
    except ScalebenchError as error:
        print(*error_lines(error), sep="\n", file=sys.stderr)
        return exit_status(error)
    except OSError as error:
        if not is_storage_error(error):
            raise
        print(*error_lines(storage_full(error)), sep="\n", file=sys.stderr)
        return EXIT_STORAGE_FULL
    except Exception as error:
        # provenance.results loads pandas: imported only on this path
        from provenance.results import UnreadableResults

        if not isinstance(error, UnreadableResults):
            raise
        print(*error_lines(error), sep="\n", file=sys.stderr)
        return EXIT_BAD_INPUT


def unbound_hint(path: Path) -> str:
    """Inside the scalebench image, which bind would make a missing ``path`` visible; else
    '' (a host that is itself a container gets no hint about binds)."""
    from provenance.process import BUILD_INFO_PATHS

    if not (os.environ.get("APPTAINER_CONTAINER")
            or any(Path(marker).is_file() for marker in BUILD_INFO_PATHS)):
        return ""
    folder = Path(os.path.abspath(path)).parent
    return (f"; a container sees only the host folders bound into it: bind {folder} (e.g. "
            f"--bind {folder}:{folder}) or put the file in the folder bound at /results")


def unreadable_file_error(path: Path, what: str, error: OSError) -> ConfigError:
    """The one-line error for ``what`` (e.g. "config") at ``path`` that cannot be read; a
    missing file inside a container names the bind to add."""
    hint = unbound_hint(path) if isinstance(error, FileNotFoundError) else ""
    return ConfigError(f"cannot read {what} {path}: {error.strerror}{hint}")
