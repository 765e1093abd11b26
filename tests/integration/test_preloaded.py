"""Ranks whose benchopt process is forked from the preloaded server (scalebench.launch.preloaded,
what a tuning's trials run on): the same run as a fresh process, row for row and estimate for
estimate; a fresh process where the server may not fork (another environment) or is gone; a
forked process's end and signals reported as a fresh one's; and ended when the rank that
asked for it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from scalebench.launch import preloaded
from scalebench.launch.rank_entry import benchopt_command
from scalebench.rank.names import HOST_PEAK_SINCE_RESET, HOST_PEAK_SINCE_RESET_FORKED
from tests.support.cli import tiny_experiment, write_experiment
from tests.support.paths import REPO

QUALITY = ["objective_psnr_db", "objective_ssim", "objective_mse", "prov_result_sha256",
           "prov_torch_threads", "prov_config_hash"]


def steady_environment(**more: str) -> dict[str, str]:
    """This process's environment without what pytest changes from one test to the next
    (a server compares a request's whole environment with its own)."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}, **more}


@pytest.fixture(scope="module")
def server():
    """A server for this module's tests: the variables that name it."""
    with preloaded.serving(steady_environment()) as variables:
        assert variables, "the preloaded server did not start"
        yield variables


def run_tiny(folder: Path, name: str, **env: str) -> pd.DataFrame:
    config = write_experiment(folder, tiny_experiment(), f"{name}.yml")
    done = subprocess.run(
        [sys.executable, "-m", "scalebench", "run", str(config), "--outputs", str(folder),
         "--output", name, "--no-html"], cwd=REPO, capture_output=True, text=True,
        check=False, timeout=600, env=steady_environment(**env))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return pd.read_parquet(folder / f"{name}.parquet")


def test_a_forked_rank_runs_the_same_experiments_as_fresh_ones(server, tmp_path):
    fresh, forked = run_tiny(tmp_path, "fresh"), run_tiny(tmp_path, "forked", **server)
    assert set(fresh["objective_host_memory_method"]) == {HOST_PEAK_SINCE_RESET}
    assert set(forked["objective_host_memory_method"]) == {HOST_PEAK_SINCE_RESET_FORKED}
    assert len(set(forked["experiment_id"])) == 2  # two experiments, two forks
    pd.testing.assert_frame_equal(fresh[QUALITY].reset_index(drop=True),
                                  forked[QUALITY].reset_index(drop=True))


def test_another_import_time_environment_or_no_server_starts_a_fresh_process(server,
                                                                             tmp_path):
    threads = "2" if os.environ.get("OMP_NUM_THREADS") != "2" else "1"
    other = run_tiny(tmp_path, "other", **server, OMP_NUM_THREADS=threads)
    assert set(other["objective_host_memory_method"]) == {HOST_PEAK_SINCE_RESET}
    assert set(other["prov_torch_threads"]) == {int(threads)}  # as the variable says
    gone = {preloaded.SERVER_VARIABLE: str(tmp_path / "no-server.sock")}
    assert set(run_tiny(tmp_path, "gone", **gone)["objective_host_memory_method"]) == \
        {HOST_PEAK_SINCE_RESET}


def benchopt_process(server: dict[str, str], *arguments: str):
    """``python -m scalebench.benchopt_glue ARGUMENTS`` asked of the server."""
    command = [sys.executable, "-m", "scalebench.benchopt_glue", *arguments]
    process = preloaded.start(command, steady_environment(**server))
    assert isinstance(process, preloaded.PreloadedProcess)
    return process


def test_a_forked_process_reports_its_output_and_exit_status(server):
    helped = benchopt_process(server, "run", "--help")
    assert b"Usage: benchopt run" in helped.stdout.read()
    assert helped.wait() == 0
    refused = benchopt_process(server, "run", "--no-such-option")
    assert b"No such option" in refused.stdout.read()
    assert refused.wait() == 2


def long_run(server: dict[str, str], folder: Path):
    """A forked benchopt run of a few thousand iterations, once it has started iterating."""
    experiment = tiny_experiment(solver=[{"pnp": {"max_iter": 100000, "device": "cpu"}}],
                                 **{"max-runs": 100000})
    config = write_experiment(folder, experiment, "long.yml")
    command = benchopt_command([sys.executable], REPO / "benchmark_inference", config,
                               folder / "long.parquet")
    process = preloaded.start(command, steady_environment(**server))
    assert isinstance(process, preloaded.PreloadedProcess)
    time.sleep(3)
    assert process.poll() is None
    return process


def test_a_signal_ends_a_forked_process_as_it_ends_a_fresh_one(server, tmp_path):
    process = long_run(server, tmp_path)
    process.send_signal(signal.SIGTERM)
    assert process.wait() == -signal.SIGTERM


def test_a_forked_process_ends_when_the_rank_that_asked_for_it_dies(server, tmp_path):
    process = long_run(server, tmp_path)
    process.connection.close()  # all the server sees of a rank's death
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the forked process outlived its rank")


def test_the_server_and_its_socket_are_gone_after_the_block():
    with preloaded.serving(steady_environment()) as variables:
        path = Path(variables[preloaded.SERVER_VARIABLE])
        assert path.exists()
    assert not path.parent.exists()
