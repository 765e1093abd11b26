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
from tests.support.paths import REPO

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


def _lock(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "containers/lock.py"), *args],
                          capture_output=True, text=True, check=False)


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
    result = _lock(str(lock))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "'torch>=2' is not 'NAME==VERSION" in result.stderr
    assert lock.read_text() == "torch>=2\n"


def test_lock_refuses_two_pins_of_one_package(tmp_path):
    lock = tmp_path / "constraints.txt"
    text = 'numpy==2.0.0 ; python_version < "3.12"\nNumPy==2.3.0 ; python_version >= "3.12"\n'
    lock.write_text(text)
    result = _lock(str(lock))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "NumPy is pinned twice" in result.stderr and "keep one pin per package" in result.stderr
    assert lock.read_text() == text


def test_lock_with_an_interpreter_that_does_not_run_is_a_one_line_error(tmp_path):
    lock = tmp_path / "constraints.txt"
    lock.write_text("numpy==2.0.0\n")
    result = _lock(str(lock), "--python", str(tmp_path / "no-python"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"lock.py: error: cannot run {tmp_path / 'no-python'}")
    assert lock.read_text() == "numpy==2.0.0\n"


def test_the_rewritten_lock_is_readable_by_everyone(tmp_path):
    """The image copies constraints.txt with its mode; its self-test reads it as any user."""
    lock = tmp_path / "constraints.txt"
    lock.write_text("")
    previous = os.umask(0o022)
    try:
        result = _lock(str(lock))
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    assert lock.stat().st_mode & 0o777 == 0o644
