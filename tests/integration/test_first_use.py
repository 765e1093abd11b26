"""The paths users take first: every mistake is refused in one line with exit 2 before anything
runs (a read-only results folder, a problem too large for the machine, non-finite numbers, a
Walnut config asking for more views than the scan has, several problems at once, a missing
config), `--version`, `fetch` of an unknown data set or from a server that refuses the
connection, and the ranks a local plan needs."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.cli import run_cli, tiny_experiment, write_experiment
from tests.support.paths import REPO

ERROR = "scalebench: error: "


def _one_error_line(result, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _read_only_mount(folder: Path) -> list[str]:
    """A command prefix that runs the command with ``folder`` bind-mounted read-only (a user
    and mount namespace of its own: a real read-only file system, which root cannot write
    either)."""
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"{mount} && ! touch {folder}/probe"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no user/mount namespace for a read-only mount here: "
                    f"{probe.stderr.strip() or probe.returncode}")
    return ["unshare", "-rm", "sh", "-c", f'{mount} && exec "$@"', "sh"]


def test_a_read_only_outputs_folder_is_refused_in_one_line_before_anything_runs(tmp_path):
    folder = tmp_path / "readonly"
    folder.mkdir()
    config = write_experiment(tmp_path, tiny_experiment())
    prefix = _read_only_mount(folder)
    for outputs in (folder, folder / "new" / "deeper"):
        result = subprocess.run(
            [*prefix, sys.executable, "-m", "scalebench", "run", str(config), "--outputs",
             str(outputs)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
        _one_error_line(result, f"--outputs folder {outputs} cannot be written",
                        "Read-only file system")
        assert "Traceback" not in result.stderr
    assert list(folder.iterdir()) == []


def test_outputs_under_a_file_is_refused_in_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_cli("run", write_experiment(tmp_path, tiny_experiment()), "--outputs",
                     blocker / "out")
    _one_error_line(result, f"--outputs folder {blocker / 'out'} cannot be written")


def test_a_problem_too_large_for_the_machine_is_refused_before_any_rank_starts(tmp_path):
    experiment = tiny_experiment(dataset=[{"synthetic": {"image_size": 100000}}],
                                 solver=[{"denoiser": {"max_iter": 1, "device": "cpu"}}])
    config = write_experiment(tmp_path, experiment)
    for command in ("validate", "run"):
        outputs = tmp_path / "out"
        result = run_cli(command, config, *(["--outputs", outputs] if command == "run" else []))
        _one_error_line(result, "memory estimate", "GiB", "is above this machine's")
        assert "Results:" not in result.stdout
    assert not outputs.exists()  # no results, logs or staging folder, not even the folder


def test_validate_leaves_the_memory_of_slurm_experiments_to_their_compute_nodes(tmp_path):
    """On a login node: 2 x 64 SLURM ranks do not run here; the same 128 ranks as local
    processes (--nproc) would, and cannot fit."""
    solver = {"max_iter": 1, "device": "cpu", "tile_size": 64, "distribute_denoiser": True}
    dataset = [{"synthetic": {"image_size": 8192}}]
    on_nodes = tiny_experiment(dataset=dataset, solver=[{"denoiser": {
        **solver, "slurm_nodes": 2, "slurm_ntasks_per_node": 64}}])
    result = run_cli("validate", write_experiment(tmp_path, on_nodes))
    assert result.returncode == 0, result.stderr
    local = tiny_experiment(dataset=dataset, solver=[{"denoiser": solver}])
    result = run_cli("validate", write_experiment(tmp_path, local), "--nproc", "128")
    _one_error_line(result, "memory estimate", "is above this machine's")


def test_validation_reports_every_problem_at_once_one_line_each(tmp_path):
    experiment = tiny_experiment(objective=["least_squares"], dataset=["walnut_4d"],
                                 solver=[{"pnp": {"max_iter": 0}}, "admm"], timeout="soon")
    result = run_cli("validate", write_experiment(tmp_path, experiment))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert all(line.startswith(ERROR) for line in lines), result.stderr
    expected = ["objective must be", "unknown dataset 'walnut_4d'", "run option 'timeout'",
                "parameter 'max_iter' must be an integer >= 1", "unknown solver 'admm'"]
    assert len(lines) == len(expected), lines
    for needle in expected:
        assert sum(needle in line for line in lines) == 1, (needle, lines)


def test_walnut_views_beyond_the_fetched_scan_are_refused_by_validate_plan_and_run(
        in_walnut_cache, tmp_path):
    from tests.support.walnut_fixture import VIEWS

    experiment = tiny_experiment(
        dataset=[{"walnut_conebeam": {"binning": 2, "num_projections": VIEWS + 1}}],
        solver=[{"pnp": {"max_iter": 1, "device": "cpu"}}])
    config = write_experiment(tmp_path, experiment)
    message = f"num_projections ({VIEWS + 1}) exceeds the {VIEWS} views of orbit 2"
    for command in ("validate", "plan", "run"):
        extra = ["--outputs", tmp_path / "out"] if command == "run" else []
        result = run_cli(command, config, *extra)
        assert result.returncode == 2, (command, result.stderr)
        assert message in result.stderr, (command, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_missing_config_is_reported_at_once(tmp_path):
    """Before any child process starts (run) and before the stack is imported (validate,
    plan): the launcher's children are started through --python, which records each start."""
    started = tmp_path / "started"
    recorder = tmp_path / "python"
    recorder.write_text(f'#!/bin/sh\necho "$@" >> {started}\nexec {sys.executable} "$@"\n')
    recorder.chmod(0o755)
    result = run_cli("run", "no/such/experiment.yml", "--python", recorder)
    _one_error_line(result, "cannot read config no/such/experiment.yml: No such file")
    assert not started.exists(), started.read_text()
    for command in ("validate", "plan"):
        code = ("import sys; from scalebench.cli import main; "
                f"status = main([{command!r}, 'no/such/experiment.yml']); "
                "print(status, sorted(m for m in ('torch', 'deepinv', 'benchopt') "
                "if m in sys.modules))")
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.stdout.split("\n")[0] == "2 []", (command, done.stdout, done.stderr)
        assert done.stderr == f"{ERROR}cannot read config no/such/experiment.yml: No such " \
                              f"file or directory\n"


def test_version_is_the_package_version_and_help_shows_it():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = run_cli("--version", timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == f"scalebench {version}"
    assert f"scalebench {version}" in run_cli("--help", timeout=60).stdout


def test_fetch_of_an_unknown_data_set_is_bad_input(tmp_path):
    result = run_cli("fetch", "--data", "nosuchset", "--cache", tmp_path, timeout=120)
    _one_error_line(result, "unknown data set 'nosuchset' (allowed: walnut)")


def test_local_plan_command_prints_the_ranks_and_the_warning(tmp_path):
    cores = len(os.sched_getaffinity(0))
    ranks = cores + 1  # one operator per rank, so that every rank has work
    experiment = tiny_experiment(
        dataset=[{"tomography_2d": {"image_size": 32, "num_angles": 2 * ranks,
                                    "num_operators": ranks}}],
        solver=[{"pnp": {"max_iter": 2, "device": "cpu", "distribute_physics": True}}])
    result = run_cli("plan", write_experiment(tmp_path, experiment), "--nproc", str(cores + 1))
    assert result.returncode == 0, result.stderr
    assert f"ranks: {cores + 1} per job, on this machine ({cores} core(s))" in result.stdout
    assert f"needs {cores + 1} rank(s) x 1 thread(s) but this machine has {cores} core(s)" \
        in result.stderr
