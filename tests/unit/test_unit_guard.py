"""The guard of tests/conftest.py: a unit test that starts a process fails, whichever way it
starts it."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("start", [
    lambda: subprocess.run(["true"], check=False),
    lambda: subprocess.check_output([sys.executable, "-c", "pass"]),
    lambda: os.popen("true").read(),
    lambda: os.system("true"),
    lambda: os.posix_spawn("/bin/true", ["true"], {}),
    lambda: os.fork(),
    lambda: os.execv("/bin/true", ["true"]),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
], ids=["run", "check_output", "popen", "system", "posix_spawn", "fork", "execv",
        "multiprocessing"])
def test_a_unit_test_that_starts_a_process_fails(start):
    with pytest.raises(pytest.fail.Exception, match="^a unit test starts no process, but this "
                                                    "one called .*: move it to "
                                                    "tests/integration"):
        start()


def test_the_guard_cannot_be_caught_as_an_ordinary_error():
    caught = []
    with pytest.raises(pytest.fail.Exception):
        try:
            subprocess.run(["true"], check=False)
        except Exception as error:  # what code under test may catch: not the guard's failure
            caught.append(error)
    assert caught == []
