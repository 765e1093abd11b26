"""The preloaded server's rule for which requests it may fork (scalebench.launch.preloaded):
only those whose interpreter, working directory and import-time environment equal its own."""

from __future__ import annotations

import sys

from scalebench.launch.preloaded import forked, refusal

SERVER_ENV = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "1", "HOME": "/root"}
CWD = "/work"


def request(**changes) -> dict:
    return {"argv": ["-m", "scalebench.benchopt_glue", "run"], "env": dict(SERVER_ENV),
            "cwd": CWD, "executable": sys.executable, **changes}


def test_a_request_like_the_server_but_for_per_run_variables_is_forked():
    env = {**SERVER_ENV, "RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": "29500",
           "SCALEBENCH_TRIAL": "{}", "BENCHOPT_RAISE_ON_ERROR": "true",
           "PYTHONUNBUFFERED": "1"}
    assert refusal(request(env=env), SERVER_ENV, CWD) is None


def test_an_import_time_variable_that_differs_is_refused_by_name():
    threads = request(env={**SERVER_ENV, "OMP_NUM_THREADS": "2"})
    assert refusal(threads, SERVER_ENV, CWD) == "another environment (OMP_NUM_THREADS)"
    missing = request(env={k: v for k, v in SERVER_ENV.items() if k != "HOME"})
    assert refusal(missing, SERVER_ENV, CWD) == "another environment (HOME)"


def test_another_interpreter_or_working_directory_is_refused():
    assert "another interpreter" in refusal(request(executable="/opt/python"), SERVER_ENV,
                                            CWD)
    assert "another working directory" in refusal(request(cwd="/tmp"), SERVER_ENV, CWD)


def test_a_process_knows_whether_the_server_forked_it():
    assert forked({"SCALEBENCH_FORKED": "1"})
    assert not forked({})
