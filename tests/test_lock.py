"""`make lock` rewrites constraints.txt from the installed environment and keeps every pin that
environment does not hold (the images' extra, pins for other interpreters)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from containers.generate import read_lock
from tests.conftest import REPO

NOT_INSTALLED = "cufinufft"  # the radio-cuda extra (CUDA only): never installed by `make test`
MARKED = 'some-other-python-package==1.2.3 ; python_version >= "3.12"'


def make_lock(folder: Path, lock: str) -> subprocess.CompletedProcess:
    """`make lock` in a copy of the project, on this test's environment (already installed)."""
    for name in ("Makefile", "pyproject.toml", "containers/lock.py"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, folder / name)
    (folder / "constraints.txt").write_text(lock)
    stamp = folder / "installed"
    stamp.touch()
    later = (folder / "constraints.txt").stat().st_mtime + 10
    os.utime(stamp, (later, later))  # the environment counts as set up: no reinstall
    return subprocess.run(["make", "-C", str(folder), "lock", f"BIN={Path(sys.executable).parent}",
                           f"STAMP={stamp}"], capture_output=True, text=True, check=False,
                          timeout=120)


def test_make_lock_keeps_pins_of_packages_not_installed(tmp_path):
    previous = (REPO / "constraints.txt").read_text()
    pytest_pin = f"pytest=={metadata.version('pytest')}"
    assert pytest_pin in previous
    edited = previous.replace(pytest_pin, "pytest==1.0") + MARKED + "\n"
    result = make_lock(tmp_path, edited)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (tmp_path / "constraints.txt").read_text()
    locked, before = read_lock(text), read_lock(previous)
    assert set(before) <= set(locked)  # no pin is lost
    assert locked[NOT_INSTALLED] == before[NOT_INSTALLED]
    assert locked["nvidia-cuda-runtime-cu12"] == before["nvidia-cuda-runtime-cu12"]
    assert MARKED in text.splitlines()  # kept with its environment marker
    assert pytest_pin in text.splitlines()  # installed packages take their installed version
    assert locked["setuptools"] == metadata.version("setuptools")  # pip freeze hides it
    assert "pip" not in locked
    assert f"packages not installed here: {NOT_INSTALLED}," in result.stdout
    pins = [line for line in text.splitlines() if not line.startswith("#")]
    assert pins == sorted(pins, key=lambda line: line.split("==")[0].lower().replace("_", "-"))


def test_lock_refuses_a_line_it_cannot_keep(tmp_path):
    lock = tmp_path / "constraints.txt"
    lock.write_text("torch>=2\n")
    result = subprocess.run([sys.executable, str(REPO / "containers/lock.py"), str(lock)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "'torch>=2' is not 'NAME==VERSION" in result.stderr
    assert lock.read_text() == "torch>=2\n"
