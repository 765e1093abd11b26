"""Running scalebench as a user does, and the small files the tests give it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import BENCHMARK, REPO


def run_cli(*args: str, cwd: Path = REPO, timeout: int = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m scalebench ARGS`` as a user would, capturing its output; ``env``:
    variables set over this process's."""
    return subprocess.run([sys.executable, "-m", "scalebench", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=None if env is None else {**os.environ, **env})


def modules_loaded_after(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter in the repository holds after running
    ``code``."""
    check = f"import sys; {code}; print(','.join(m for m in {modules!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                            cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    return [name for name in result.stdout.strip().split(",") if name]


def copy_benchmark(folder: Path, source: Path = BENCHMARK) -> Path:
    """A private copy of a benchmark folder inside ``folder``, so outputs stay in the test."""
    copy = folder / source.name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("outputs", "__pycache__"))
    return copy


def edited_results(source: Path, target: Path, edit) -> Path:
    """``target``: the results file ``source`` with ``edit(DataFrame)`` applied to its rows,
    its metadata (provenance records, run record) kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    frame = edit(table.to_pandas())
    edited = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), target)
    return target


def parent_of(pid: int) -> int:
    """``pid``'s parent process, 1 once it has ended."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 1


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, read from each process's parent link (processes may end
    while they are read)."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        children.setdefault(parent_of(int(proc.name)), []).append(int(proc.name))
    found, queue = [], [pid]
    while queue:
        below = children.get(queue.pop(), [])
        found += below
        queue += below
    return found


def rank_process(launcher: int, rank: int, module: str) -> int | None:
    """The process of ``rank`` under ``launcher`` whose command line runs ``module``."""
    for pid in descendants(launcher):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if module.encode() in command and f"RANK={rank}".encode() in environ:
            return pid
    return None


def write_experiment(folder: Path, experiment: dict, name: str = "experiment.yml") -> Path:
    """``experiment`` as the YAML file ``folder/name`` (keys in their given order)."""
    import yaml

    path = folder / name
    path.write_text(yaml.safe_dump(experiment, sort_keys=False))
    return path


def tiny_experiment(**overrides) -> dict:
    """A seconds-long experiment: 32x32 tomography, 3 PnP and 2 denoiser iterations."""
    experiment = {
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"tomography_2d": {"image_size": 32, "num_angles": 12,
                                       "num_operators": 2, "noise_level": 0.05}}],
        "solver": [
            {"pnp": {"max_iter": 3, "device": "cpu", "denoiser_sigma": 0.002}},
            {"denoiser": {"max_iter": 2, "device": "cpu"}},
        ],
        "n-repetitions": 1,
        "max-runs": 100,
        "timeout": 300,
    }
    experiment.update(overrides)
    return experiment


def benchopt_suite(benchmark: Path, cwd: Path, *pytest_args: str,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """benchopt's own benchmark test suite (what `benchopt test` runs) on ``benchmark``; its
    install tests create conda environments and are left out where conda is missing."""
    import benchopt.tests

    suite = Path(benchopt.tests.__file__).parent
    selection = [] if shutil.which("conda") else ["-k", "not install"]
    if "-k" in pytest_args:  # the caller's selection, within the installable ones
        at = pytest_args.index("-k")
        words = pytest_args[at + 1] if shutil.which("conda") \
            else f"not install and ({pytest_args[at + 1]})"
        selection, pytest_args = ["-k", words], pytest_args[:at] + pytest_args[at + 2:]
    env = {**(env or os.environ), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "benchopt.tests.fixtures", "--rootdir",
         str(suite), str(suite / "test_benchmarks.py"), "--benchmark", str(benchmark),
         "--import-mode", "importlib", "-q", "-p", "no:cacheprovider", *selection,
         *pytest_args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
        check=False)


def suite_passed(done: subprocess.CompletedProcess) -> bool:
    """Whether a benchopt_suite run passed: its summary names passed tests and no failure."""
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    return done.returncode == 0 and " passed" in summary and "failed" not in summary


def command_line(pid: int) -> str:
    """The command line of process ``pid``, its arguments joined by spaces; "" once it ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
