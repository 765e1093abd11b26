"""The light launcher: no copy of the stack in the waiting process, signals reach the ranks."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, copy_benchmark, tiny_experiment

HEAVY = ("torch", "deepinv", "benchopt", "numpy", "pandas", "pyarrow", "yaml")
LIGHT_MODULES = ("scalebench.cli", "scalebench.launch.runner", "scalebench.launch.ranks",
                 "scalebench.launch.rank_entry", "scalebench.runtimes")


def test_launcher_modules_import_only_the_standard_library():
    code = (f"import sys; import {', '.join(LIGHT_MODULES)}; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=REPO)
    assert done.stdout.strip() == "[]"


def _descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                direct = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                direct = []
            found += direct
            queue += direct
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _maps_torch(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.fixture
def running(tmp_path, write_config):
    """A launcher whose benchopt worker is running (long enough to be interrupted)."""
    benchmark = copy_benchmark(tmp_path)
    experiment = tiny_experiment(solver=[{"pnp": {"max_iter": 400, "device": "cpu"}}],
                                 **{"max-runs": 1000})
    launcher = subprocess.Popen(
        [sys.executable, "-m", "scalebench", "run", str(write_config(experiment)),
         "--benchmark", str(benchmark), "--output", "long", "--no-html"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, worker = time.monotonic() + 120, None
    while worker is None and time.monotonic() < deadline:
        worker = next((pid for pid in _descendants(launcher.pid)
                       if "-m benchopt run" in _cmdline(pid)), None)
        time.sleep(0.1)
    assert worker is not None, "the benchopt worker did not start"
    while not _maps_torch(worker) and time.monotonic() < deadline:
        time.sleep(0.1)  # the worker is running once it holds the stack
    assert _maps_torch(worker), "the benchopt worker did not load torch"
    yield launcher, worker, benchmark
    if launcher.poll() is None:
        launcher.kill()


def test_waiting_launcher_holds_no_torch(running):
    launcher, worker, _ = running
    maps = Path(f"/proc/{launcher.pid}/maps").read_text()
    assert "libtorch" not in maps and _maps_torch(worker)
    status = Path(f"/proc/{launcher.pid}/status").read_text()
    rss_kb = int(next(line for line in status.splitlines()
                      if line.startswith("VmRSS:")).split()[1])
    assert rss_kb < 100 * 1024


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_reaches_the_worker_and_removes_the_staging_folder(running, signum):
    launcher, worker, benchmark = running
    launcher.send_signal(signum)
    _, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == 128 + signum
    assert f"stopped by {signal.Signals(signum).name}" in stderr
    assert not Path(f"/proc/{worker}").exists() or "benchopt" not in _cmdline(worker)
    outputs = benchmark / "outputs"
    assert not list(outputs.glob(".staging-*"))
    assert not (outputs / "long.parquet").exists()  # nothing had finished


def test_no_rank_outlives_a_killed_launcher(running):
    launcher, worker, _ = running
    launcher.kill()  # SIGKILL: the launcher cannot pass anything on
    launcher.wait(timeout=30)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{worker}").exists() and "benchopt" in _cmdline(worker) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{worker}").exists() or "benchopt" not in _cmdline(worker)


def test_a_benchmark_folder_of_another_objective_is_refused_before_anything_runs(
        tmp_path, write_config):
    benchmark = copy_benchmark(tmp_path)  # benchmark_inference
    config = write_config({"objective": ["Supervised_Training"],
                           "dataset": [{"synthetic": {"image_size": 32}}],
                           "solver": [{"unrolled_pgd": {"max_iter": 1}}]})
    done = subprocess.run(
        [sys.executable, "-m", "scalebench", "run", str(config), "--benchmark",
         str(benchmark), "--output", "wrong"], cwd=REPO, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"scalebench: error: the config's objective is run by benchmark_training, not by the "
        f"--benchmark folder {benchmark} (give {REPO / 'benchmark_training'} or leave "
        f"--benchmark out; SLURM templates: SB_BENCHMARK)"]
    assert not (benchmark / "outputs").exists()


def test_results_go_to_the_outputs_folder_given(tmp_path, write_config):
    benchmark = copy_benchmark(tmp_path)
    experiment = tiny_experiment(solver=[{"pnp": {"max_iter": 1, "device": "cpu"}}])
    done = subprocess.run(
        [sys.executable, "-m", "scalebench", "run", str(write_config(experiment)),
         "--benchmark", str(benchmark), "--outputs", str(tmp_path / "results"), "--output",
         "elsewhere", "--no-html"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "results" / "elsewhere.parquet").is_file()
    assert not (benchmark / "outputs").exists()
