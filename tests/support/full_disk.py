"""A small file system filled at a chosen moment of a launch (or another fault done then):
the full-disk tests and ``tools.fault_table`` alike. Mounting a tmpfs needs root."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

FILLER = ".filler"


class NotMountable(RuntimeError):
    """This machine cannot mount the small file system (not root, no tmpfs)."""


@contextmanager
def small_tmpfs(folder: Path, size: str = "24m") -> Iterator[Path]:
    """``folder`` as a tmpfs of ``size``, unmounted at the end whatever happens."""
    if os.geteuid() != 0:
        raise NotMountable("mounting a small tmpfs to fill needs root")
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(folder)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        raise NotMountable(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


def fill(disk: Path) -> None:
    """Write zeros into ``disk`` until it is full."""
    with (disk / FILLER).open("ab", buffering=0) as filler:
        try:
            while True:
                filler.write(bytes(1 << 20))
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise


def free(disk: Path) -> None:
    (disk / FILLER).unlink()


def run_filling(command: list[str], disk: Path, fill_when: Callable[[], bool], cwd: Path,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``command``, filling ``disk`` the moment ``fill_when()`` holds."""
    return run_acting(command, fill_when, lambda _: fill(disk), cwd, env)


def run_acting(command: list[str], when: Callable[[], bool],
               action: Callable[[subprocess.Popen], None], cwd: Path,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``command``, doing ``action(process)`` the moment ``when()`` holds (polled every
    10 ms on a thread); RuntimeError when the command ended before that moment came."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    acted = threading.Event()

    def watch() -> None:
        while process.poll() is None:
            if when():
                action(process)
                acted.set()
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    stdout, stderr = process.communicate(timeout=600)
    watcher.join()
    if not acted.is_set():
        raise RuntimeError(f"the command ended before the moment came: {stderr[-3000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


# The moments of a launch publishing NAME.parquet into the disk, its first experiment done.

def after_first_publish(disk: Path, name: str) -> Callable[[], bool]:
    return lambda: (disk / f"{name}.parquet").exists()


def during_second_run(disk: Path, name: str) -> Callable[[], bool]:
    """Experiment 2's rank 0 is running: its log in the staging folder has its first lines."""
    return lambda: (disk / f"{name}.parquet").exists() and any(
        _size(log) > 0 for log in disk.glob(f".staging-{name}-*/*/rank0.log"))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # moved away since it was listed
        return 0


def before_second_publish(disk: Path, name: str) -> Callable[[], bool]:
    """Experiment 2 ended and its log was kept: the launcher is publishing it."""
    return lambda: len(list((disk / name / "logs").glob("*.rank0.log"))) >= 2


MOMENTS = {"after the first publish": after_first_publish,
           "during a rank's run": during_second_run,
           "during the publish": before_second_publish}
