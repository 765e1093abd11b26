"""Errors and warnings the user sees, and the exit statuses of every scalebench command.

A ``ScalebenchError`` is bad input (exit 2): the message names what is wrong and what is
allowed. A ``CommandFailed`` is work that failed on good input (exit 1): a run with a failed
experiment, a download that does not match its manifest, an image that is another one. The
CLI, the launcher's steps and the container helpers print either as ``scalebench: error:``
lines (``error_lines``) and exit with ``exit_status``. Warnings are ``scalebench: warning:``
lines on stderr, some of them once per process (``warn_once``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
WARNING_PREFIX = "scalebench: warning: "
# What this process has warned about once (warn_once): only warn_once adds to it.
_WARNED: set[tuple] = set()


class ScalebenchError(Exception):
    """A user-facing error: the message names what is wrong and what is allowed."""


class CommandFailed(ScalebenchError):
    """The input was valid but the work failed; the message says what happened."""


def exit_status(error: ScalebenchError) -> int:
    """The exit status of a command that ended with ``error``."""
    return EXIT_FAILED if isinstance(error, CommandFailed) else EXIT_BAD_INPUT


class ConfigError(ScalebenchError):
    """An experiment configuration, parameter value or command-line argument is invalid."""


class MissingFileError(ScalebenchError):
    """A file the run needs (weights, data) is not where it was asked for."""


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
    """``call()``'s exit status; a ScalebenchError or an unreadable results file is printed
    as ``error_lines`` and ends in its exit status instead (anything else propagates)."""
    try:
        return call()
    except ScalebenchError as error:
        print(*error_lines(error), sep="\n", file=sys.stderr)
        return exit_status(error)
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
    from provenance.environment import BUILD_INFO_PATHS

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
