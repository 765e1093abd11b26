"""A full file system under a launch (a small tmpfs filled at a chosen moment): the launch stops
at once in one line with exit status 3, the published file stays readable with the finished
experiments' rows, and once space is freed the printed command completes every row. A
``--resume`` of a truncated or foreign file is refused in one line and leaves it untouched.

The tmpfs is mounted in a user and mount namespace of its own, so no root is needed; where
user namespaces are disabled the full-disk tests are skipped with the reason, and fail in CI."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scalebench.errors import EXIT_BAD_INPUT, EXIT_STORAGE_FULL
from scalebench.results.store import RUN_KEY
from tests.support.ci import skip_unless_ci
from tests.support.cli import copy_benchmark, run_cli, tiny_experiment, write_experiment
from tests.support.full_disk import (
    NotMountable,
    SmallDisk,
    after_first_publish,
    before_second_publish,
    during_second_run,
    run_filling,
    small_tmpfs,
)
from tests.support.paths import REPO

SEEDS = 3  # experiments of the launch
ROWS = 3  # rows of each experiment: its 2 iterations and the initial estimate


@pytest.fixture
def small_disk(tmp_path) -> Iterator[SmallDisk]:
    try:
        with small_tmpfs(tmp_path / "disk") as disk:
            yield disk
    except NotMountable as reason:
        skip_unless_ci(str(reason))


def launch(config: Path, benchmark: Path, disk: SmallDisk,
           fill_when: Callable[[], bool]) -> subprocess.CompletedProcess:
    """The launch into ``disk``, filled the moment ``fill_when()`` holds."""
    command = [sys.executable, "-m", "scalebench", "run", str(config), "--benchmark",
               str(benchmark), "--output", "t", "--outputs", str(disk.folder), "--no-html"]
    return run_filling(command, disk, fill_when, REPO)


@pytest.fixture
def three_experiments(tmp_path) -> tuple[Path, Path]:
    """A config of three seconds-long experiments and a private benchmark copy."""
    experiment = tiny_experiment(solver=[{"pnp": {"max_iter": 2, "device": "cpu",
                                                  "denoiser_sigma": 0.002,
                                                  "seed": list(range(SEEDS))}}])
    return write_experiment(tmp_path, experiment, "three.yml"), copy_benchmark(tmp_path)


@pytest.mark.parametrize(("moment", "what"), [
    (after_first_publish, "rank 0 of experiment 2/3"),
    (during_second_run, "rank 0 of experiment 2/3"),
    (before_second_publish, "cannot write the results file"),
], ids=["after-the-first-publish", "during-a-rank-run", "during-the-publish"])
def test_a_full_results_disk_stops_in_one_line_and_resume_completes(
        small_disk, three_experiments, moment, what):
    config, benchmark = three_experiments
    final = small_disk.folder / "t.parquet"  # as the launch names it
    done = launch(config, benchmark, small_disk, moment(small_disk.here, "t"))
    assert done.returncode == EXIT_STORAGE_FULL, done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "OSError" not in output, output[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("scalebench: ")]
    assert len(errors) == 1, done.stderr[-3000:]
    line = errors[0]
    assert line.startswith(f"scalebench: error: {what}"), line
    assert f"{final} holds 1 of {SEEDS} experiment(s), {ROWS} rows, partial" in line, line
    kept = small_disk.reach(final)
    record = json.loads(pq.read_metadata(kept).metadata[RUN_KEY])
    assert record["status"] == "partial" and len(record["experiments"]) == 1
    assert pq.read_table(kept).num_rows == ROWS
    disk = small_disk.here
    assert not list(disk.glob(".staging-*")) and not list(disk.glob(".*.part"))

    small_disk.free()
    resume = line.split("free space, then resume with: ", 1)[1]
    assert resume.endswith(" --resume")
    resumed = subprocess.run(small_disk.command(shlex.split(resume), REPO), cwd=REPO,
                             capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    record = json.loads(pq.read_metadata(kept).metadata[RUN_KEY])
    assert record["status"] == "complete" and len(set(record["experiments"])) == SEEDS
    assert pq.read_table(kept).num_rows == SEEDS * ROWS


def test_a_full_cache_stops_the_first_experiment_in_one_line(small_disk, three_experiments,
                                                             tmp_path):
    config, benchmark = three_experiments
    small_disk.fill()
    cache = small_disk.folder / "cache"
    env = {**os.environ, "SCALEBENCH_CACHE": str(cache)}
    done = run_cli_env(small_disk, config, benchmark, tmp_path / "results", env)
    assert done.returncode == EXIT_STORAGE_FULL, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("scalebench: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert errors[0].startswith("scalebench: error: rank 0 of experiment 1/3"), errors[0]
    assert f"No space left on device: '{cache}" in errors[0], errors[0]
    assert "no experiment finished" in errors[0] and "run again with: " in errors[0]
    assert not (tmp_path / "results" / "t.parquet").exists()

    small_disk.free()
    again = subprocess.run(small_disk.command(shlex.split(errors[0].split(
        "run again with: ", 1)[1]), REPO), cwd=REPO, env=env, capture_output=True, text=True,
        timeout=600, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert pq.read_table(tmp_path / "results" / "t_2.parquet").num_rows == SEEDS * ROWS


def run_cli_env(disk: SmallDisk, config: Path, benchmark: Path, outputs: Path,
                env: dict[str, str]) -> subprocess.CompletedProcess:
    """The launch in ``disk``'s namespace (where its tmpfs is), results into ``outputs``."""
    command = [sys.executable, "-m", "scalebench", "run", str(config), "--benchmark",
               str(benchmark), "--output", "t", "--outputs", str(outputs), "--no-html"]
    return subprocess.run(disk.command(command, REPO), cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def results_file(path: Path) -> Path:
    """A results file as a stopped launch leaves it: partial, one experiment."""
    record = {"status": "partial", "experiments": ["e1"], "failures": [], "config": "c"}
    table = pa.table({"stop_val": list(range(200)), "objective_value": [0.5] * 200})
    pq.write_table(table.replace_schema_metadata({RUN_KEY: json.dumps(record).encode()}), path)
    return path


def truncated(folder: Path) -> Path:
    path = results_file(folder / "truncated.parquet")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def foreign(folder: Path) -> Path:
    path = folder / "foreign.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), path)
    return path


def not_parquet(folder: Path) -> Path:
    path = folder / "notes.parquet"
    path.write_text("not a results file\n")
    return path


@pytest.mark.parametrize(("make", "wrong"), [
    (truncated, "not a readable parquet file"),
    (foreign, "is not a results file of scalebench run (no run status in its metadata)"),
    (not_parquet, "not a readable parquet file"),
], ids=["truncated", "foreign-parquet", "not-parquet"])
def test_resume_of_a_bad_file_is_one_line_exit_2_and_leaves_it_untouched(
        tmp_path, three_experiments, make, wrong):
    config, benchmark = three_experiments
    results = tmp_path / "results"
    results.mkdir()
    path = make(results)
    before = path.read_bytes()
    done = run_cli("run", config, "--benchmark", benchmark, "--output", path.stem, "--outputs",
                   results, "--resume", "--no-html")
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"scalebench: error: --resume: {path}"), lines
    assert wrong in lines[0] and lines[0].endswith("the file is left as it is"), lines
    assert path.read_bytes() == before
    assert sorted(p.name for p in results.iterdir()) == [path.name]  # nothing else written
