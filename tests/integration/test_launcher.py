"""The light launcher: no copy of the stack in the waiting process, signals reach the ranks,
progress shown as the run goes (one updating line in a terminal, plain lines elsewhere)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.support.cli import copy_benchmark, descendants, modules_loaded_after, tiny_experiment
from tests.support.paths import REPO

HEAVY = ("torch", "deepinv", "benchopt", "numpy", "pandas", "pyarrow", "yaml")


LIGHT_MODULES = ("scalebench.cli", "scalebench.cli_arguments",
                 "scalebench.launch.runner", "scalebench.launch.failures",
                 "scalebench.launch.resume",
                 "scalebench.launch.processes", "scalebench.launch.rank_entry",
                 "scalebench.launch.progress", "scalebench.launch.storage",
                 "scalebench.launch.containers", "scalebench.launch.rank_env",
                 "scalebench.launch.resources", "scalebench.errors", "provenance",
                 "provenance.process", "provenance.sif")


ESCAPE = "\x1b"


STAGES = ("set-up: loading the problem", "set-up: building the operator",
          "set-up: building the denoiser", "set-up: operator norm", "set-up: initial estimate")


def test_launcher_modules_load_none_of_the_numerical_stack():
    assert modules_loaded_after(f"import {', '.join(LIGHT_MODULES)}", HEAVY) == []


@pytest.mark.parametrize(("command", "message"), [
    (["-m", "scalebench", "run", "no/such.yml"], "cannot read config no/such.yml"),
    (["-m", "scalebench", "verify-image", "no/such.sif", "--digest", "sha256:" + "0" * 64],
     "no/such.sif"),
])
def test_launcher_paths_run_on_a_python_without_site_packages(command, message):
    """The templates start the launcher with a host's plain python3 (standard library only):
    its refusals are still one line, not an ImportError."""
    done = subprocess.run([sys.executable, "-S", *command], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Error:" not in lines[0], lines


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
    deadline, worker = time.monotonic() + 300, None
    while worker is None and time.monotonic() < deadline:
        worker = next((pid for pid in descendants(launcher.pid)
                       if "-m scalebench.benchopt_glue run" in _cmdline(pid)), None)
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


def _staging_log(benchmark: Path, rank: int = 0) -> Path | None:
    found = sorted((benchmark / "outputs").glob(f".staging-*/*/rank{rank}.log"))
    return found[0] if found else None


def test_rank_log_and_plain_progress_grow_while_the_experiment_runs(running):
    launcher, _, benchmark = running
    deadline, text = time.monotonic() + 120, ""
    while time.monotonic() < deadline:
        log = _staging_log(benchmark)
        text = log.read_text() if log is not None else ""
        if re.search(r"experiment 1/1: iteration [1-9]\d*/400", text):
            break
        time.sleep(0.2)
    assert launcher.poll() is None, "the experiment ended before its progress was seen"
    assert re.search(r"experiment 1/1: iteration [1-9]\d*/400, \S+ elapsed, ETA \d", text), \
        text[-2000:]
    assert "Benchopt is running" in text  # benchopt's own output, as it comes
    for stage in STAGES:
        assert f"[scalebench] experiment 1/1: {stage}" in text
    assert ESCAPE not in text and "\r" not in text
    launcher.send_signal(signal.SIGTERM)
    stdout, _ = launcher.communicate(timeout=60)
    # not a terminal: plain lines, the same as in the log
    assert re.search(r"^\[scalebench\] experiment 1/1: iteration [1-9]\d*/400, ", stdout, re.M)
    assert ESCAPE not in stdout and "\r" not in stdout
    assert "Benchopt is running" not in stdout  # benchopt's own lines stay in the log


def _run_in_terminal(command: list[str], timeout: float) -> tuple[int, str]:
    """Run ``command`` with a 120-column pseudo-terminal as its standard streams; its exit
    status and everything it wrote there."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(command, cwd=REPO, stdin=secondary, stdout=secondary,
                               stderr=secondary, env={**os.environ, "TERM": "xterm"})
    os.close(secondary)
    output, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([primary], [], [], 1.0)[0]:
                try:
                    chunk = os.read(primary, 1 << 16)
                except OSError:  # every writer has closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
    finally:
        os.close(primary)
        if process.poll() is None:
            process.kill()
    return process.wait(timeout=60), output.decode(errors="replace")


def test_progress_in_a_terminal_is_one_updating_line_per_experiment(tmp_path, write_config):
    benchmark = copy_benchmark(tmp_path)
    experiment = tiny_experiment()
    # Long enough (about 1 s here) that a report falls between the first and the last
    # iteration (at most one per REPORT_INTERVAL_S) on a machine several times faster.
    experiment["solver"][0]["pnp"]["max_iter"] = 90
    status, output = _run_in_terminal(
        [sys.executable, "-m", "scalebench", "run", str(write_config(experiment)),
         "--benchmark", str(benchmark), "--output", "tty", "--no-html"], timeout=300)
    assert status == 0, output[-3000:]
    lines = output.replace("\r\n", "\n").split("\n")
    for position, max_iter in (("1/2", 90), ("2/2", 2)):
        shown = [line for line in lines if f"experiment {position}: iteration" in line]
        assert len(shown) == 1, shown  # one terminal line, rewritten in place
        states = [state.rstrip() for state in shown[0].split("\r") if state.strip()]
        assert len(states) >= 4 and states[-1].startswith(f"experiment {position}: done in ")
        assert f"experiment {position}: iteration {max_iter}/{max_iter}, " in shown[0]
        assert all(len(state) < 120 for state in states)  # never wraps
    updating = next(line for line in lines if "experiment 1/2: iteration" in line)
    assert re.search(r"\rexperiment 1/2: iteration \d+/90, \S+ elapsed, ETA \d", updating)
    for stage in STAGES:
        assert f"experiment 1/2: {stage}" in updating
    assert ESCAPE not in output
    assert "Benchopt is running" not in output
    logs = sorted((benchmark / "outputs" / "tty" / "logs").glob("*.rank0.log"))
    assert len(logs) == 2
    for log in logs:
        text = log.read_text()
        assert ESCAPE not in text and "\r" not in text
        assert re.search(r"^\[scalebench\] experiment [12]/2: iteration (90/90|2/2), ", text,
                         re.M)
