"""Errors caused by user input. The CLI prints them as one line and exits non-zero."""

from __future__ import annotations

import os
from pathlib import Path


class ScalebenchError(Exception):
    """A user-facing error: the message names what is wrong and what is allowed."""


class ConfigError(ScalebenchError):
    """An experiment configuration, parameter value or command-line argument is invalid."""


class MissingFileError(ScalebenchError):
    """A file the run needs (weights, data) is not where it was asked for."""


def error_lines(error: Exception) -> list[str]:
    """How the CLI prints an error: one ``scalebench: error:`` line per problem it names."""
    return [f"scalebench: error: {line}" for line in str(error).splitlines() or [""]]


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
