"""Debian packages the test harnesses install when a tool is missing (as root, with apt-get).

One file lock serialises the installs: test workers (``make test`` runs two) may need packages
at the same time, and dpkg takes one install at a time."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

LOCK = Path("/var/lock/scalebench-tests-apt.lock")


class AptError(RuntimeError):
    """apt-get cannot install what a harness needs; the message is one line."""


def apt_install(packages: Sequence[str], *, recommends: bool = True,
                timeout: float = 900) -> None:
    """``apt-get update`` and ``apt-get install PACKAGES`` under the lock."""
    if os.geteuid() != 0:
        raise AptError(f"installing {', '.join(packages)} needs root")
    if shutil.which("apt-get") is None:
        raise AptError(f"installing {', '.join(packages)} needs apt-get, and there is none")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "-o", "DPkg::Lock::Timeout=300",
               *([] if recommends else ["--no-install-recommends"]), *packages]
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for command in (["apt-get", "update", "-qq"], install):
            try:
                result = subprocess.run(command, env=env, capture_output=True, text=True,
                                        timeout=timeout, check=False)
            except (OSError, subprocess.TimeoutExpired) as error:
                raise AptError(f"{' '.join(command)}: {error}") from error
            if result.returncode != 0:
                tail = " ".join((result.stdout + result.stderr).split())[-500:]
                raise AptError(f"{' '.join(command)} failed ({result.returncode}): {tail}")
