"""Files written whole or not at all, standard library only: the commands that must stay light
(a config's checks, the launcher) write caches through it without loading pandas or pyarrow."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A fresh temporary file next to ``path`` for the block to write; renamed onto ``path``
    when the block ends normally, removed otherwise. Readers see the old file or the new one;
    concurrent writers (ranks filling one cache entry) never share a temporary file; the new
    file has a plain file's permissions (umask applied), so other users can read a cache."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.part")
    os.close(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as error:
        if error.filename or error.errno is None:
            raise
        # A write's error names no file (a full disk's ENOSPC): name the one being written.
        raise OSError(error.errno, error.strerror or str(error), str(path)) from error
    finally:
        temporary.unlink(missing_ok=True)


def write_text_atomically(path: Path, text: str) -> None:
    """``text`` at ``path`` (its folder made), whole or not at all, through a temporary file of
    this writer's own: two writers of one cache entry both succeed, and the entry is one of
    theirs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary:
        temporary.write_text(text)
