"""A hung rank (its processes stopped with SIGSTOP, as a frozen node looks) on a local
two-rank launch: named with its node once its heartbeat is silent, its experiment stopped and
recorded failed, and the next experiment run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from provenance.stop_reasons import FAILED, record_stops
from scalebench.launch.liveness import SILENCE_VARIABLE
from tests.integration.test_distributed import PNP, experiment
from tests.support.cli import copy_benchmark, rank_process
from tests.support.paths import REPO

SILENCE_S = 10  # lowered from the default minute to keep the test short


@pytest.fixture
def benchmark(tmp_path):
    return copy_benchmark(tmp_path)


def _timed_lines(stream, lines: list[tuple[float, str]]) -> threading.Thread:
    """Read ``stream`` into ``lines`` (when each came, the line) in a thread."""
    def read() -> None:
        for line in stream:
            lines.append((time.monotonic(), line.rstrip("\n")))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _wait_for_iterations(benchmark: Path, launcher: subprocess.Popen) -> str:
    """Rank 1's log once it iterates in the first experiment."""
    deadline, log = time.monotonic() + 400, ""
    while time.monotonic() < deadline and launcher.poll() is None:
        found = sorted((benchmark / "outputs").glob(".staging-*/*/rank1.log"))
        log = found[0].read_text() if found else ""
        if "experiment 1/2: iteration 0/300" in log:
            break
        time.sleep(0.1)
    return log


def test_a_stopped_rank_is_named_with_its_node_and_the_next_experiment_runs(benchmark,
                                                                            write_config):
    solvers = [{"pnp": {**PNP, "max_iter": 300}}, {"pnp": {**PNP, "max_iter": 2}}]
    config = write_config({**experiment(solvers), "max-runs": 400})
    launcher = subprocess.Popen(
        [sys.executable, "-m", "scalebench", "run", str(config), "--benchmark",
         str(benchmark), "--output", "h", "--no-html", "--nproc", "2"], cwd=REPO,
        env={**os.environ, SILENCE_VARIABLE: str(SILENCE_S)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    errors: list[tuple[float, str]] = []
    outputs: list[tuple[float, str]] = []
    readers = [_timed_lines(launcher.stderr, errors), _timed_lines(launcher.stdout, outputs)]
    victims: list[int] = []
    try:
        log = _wait_for_iterations(benchmark, launcher)
        time.sleep(1.0)  # into the iterations
        wrapper = rank_process(launcher.pid, 1, "scalebench.launch.rank_entry")
        victims = [pid for pid in (wrapper, rank_process(launcher.pid, 1,
                                                         "scalebench.benchopt_glue")) if pid]
        assert len(victims) == 2 and launcher.poll() is None, log[-2000:]
        os.killpg(wrapper, signal.SIGSTOP)  # its wrapper and benchopt: a frozen node
        stopped_at = time.monotonic()
        launcher.wait(timeout=400)
        for reader in readers:
            reader.join(10)
        states = {pid: _process_state(pid) for pid in victims}
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for pid in victims:  # never left stopped, whatever happened
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    stderr = "\n".join(line for _, line in errors)
    stdout = "\n".join(line for _, line in outputs)
    assert launcher.returncode == 1, stderr[-3000:]
    host = socket.gethostname()
    named = [(at, line) for at, line in errors
             if line.startswith(f"[scalebench] rank 1 on {host} is hung: no heartbeat for ")]
    assert len(named) == 1, stderr[-3000:]
    # the silence bound, a read of the files each second, and a loaded machine's slack
    assert named[0][0] - stopped_at < SILENCE_S + 20, stderr[-3000:]
    failed = [line for _, line in errors if "FAILED experiment 1/2" in line]
    assert len(failed) == 1 and "(rank 1): hung: no heartbeat for " in failed[0], stderr
    assert f"(stopped, or its node frozen), on {host}; log: " in failed[0]
    assert "experiment 2/2" in stdout, stdout[-3000:]
    record = json.loads(pq.read_metadata(benchmark / "outputs" / "h.parquet")
                        .metadata[b"scalebench.run"])
    (failure,) = record["failures"]
    assert (failure["rank"], failure["host"]) == (1, host)
    assert failure["error"].startswith("hung: no heartbeat for ")
    assert record["status"] == "partial" and len(record["experiments"]) == 1
    assert record_stops(record)[failure["experiment"]].reason == FAILED
    # the stopped processes were ended (gone, or ended and not yet reaped), not left stopped
    assert all(state in (None, "Z") for state in states.values()), states


def _process_state(pid: int) -> str | None:
    """``pid``'s state letter (T: stopped, Z: ended, not yet reaped), None once gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
