"""`scalebench plan` through the command line: the training configs, JSON for scripts, one line
per problem with exit 2, the large example."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli
from tests.support.paths import REPO
from tests.support.plans import (
    CONFIGS,
    SUBMITIT,
    config_file,
    jobs_of,
    parallel_file,
    plan_of,
    pnp,
    timed_calibration,
)


def test_training_configs_plan_for_the_training_benchmark():
    """The objective picks benchmark_training (and its rules); a training run has no memory
    size model, so its estimate is absent rather than an inference figure."""
    strong = plan_of(CONFIGS / "training" / "strong_scaling.yml", SUBMITIT)
    assert jobs_of(strong, ("task",), ("distribution",)) == [
        ("synthetic", ("superres",), "unrolled_pgd", (mode,), ranks)
        for mode in ("spatial", "data") for ranks in (1, 2, 4, 8)]
    # the shipped parallel config's 2 h limit is too short for the config's 4 h timeout
    assert len(strong.errors) == 8 and all(
        "time limit 7200 s is shorter than the solver timeout x repetitions (14400 s)" in line
        for line in strong.errors)
    assert strong.jobs[0].command[:3] == ["benchopt", "run", str(REPO / "benchmark_training")]
    assert all(job.rank_memory_bytes is None for job in strong.jobs)
    result = run_cli("plan", CONFIGS / "training" / "example.yml")
    assert result.returncode == 0, result.stderr
    assert "unrolled_pgd" in result.stdout and "n/a" in result.stdout


def test_cli_prints_json_for_scripts():
    result = run_cli("plan", CONFIGS / "scaling" / "tiling.yml", "--parallel-config", SUBMITIT,
                     "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [job["ranks"] for job in document["jobs"]] == [2] * 5
    assert document["totals"]["jobs"] == 5


def test_impossible_resources_give_one_line_per_problem(tmp_path):
    operators = [{"tomography_2d": {"image_size": 32, "num_angles": 12, "num_operators": 8}}]
    config = config_file(tmp_path, dataset=operators, timeout="1h",
                     solver=pnp(distribute_physics=True, slurm_ntasks_per_node=[2, 4]))
    parallel = parallel_file(tmp_path, slurm_gres="gpu:2", slurm_time="00:10:00", slurm_mem="1G")
    errors = plan_of(config, parallel).errors
    assert len(errors) == 5  # 2 jobs x (time, memory) + tasks above GPUs on the 4-rank one
    assert sum("4 tasks per node but 2 GPUs per node" in p for p in errors) == 1
    assert sum("time limit 600 s is shorter than the solver timeout" in p
               for p in errors) == 2
    assert sum("is above the node's 1.0 GiB" in p for p in errors) == 2
    result = run_cli("plan", config, "--parallel-config", parallel)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 5 and all(line.startswith("scalebench: error: job ") for line in lines)


def test_the_large_tomography_example_plans():
    result = run_cli("plan", CONFIGS / "examples" / "tomography_2d_large.yml")
    assert result.returncode == 0, result.stderr


def test_allocation_time_counts_the_allocations_and_strict_refuses_a_longer_experiment(
        tmp_path):
    """Two calibrated experiments of 3.8 and 3.3 s (4.6 and 4.0 s with the margin) in
    allocations holding 8 s before the time limit's signal window: two needed; in ones
    holding 3 s each is too long, a warning, then with --strict an error; a bad duration is
    one line, exit 2."""
    from scalebench.durations import LIMIT_SIGNAL_EARLY_S, LIMIT_SIGNAL_LEAD_S
    from scalebench.planning.capacity.configuration import Configuration

    window_s = LIMIT_SIGNAL_LEAD_S + LIMIT_SIGNAL_EARLY_S
    holding_8_s, holding_3_s = f"{8 + window_s}s", f"{3 + window_s}s"

    dataset = {"image_size": 32, "num_angles": 12}
    solvers = [{"max_iter": 2, "device": "cpu", "denoiser": "tv", "step_size": step}
               for step in (0.1, 0.2)]
    env = {"SCALEBENCH_CACHE": str(tmp_path / "cache")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCALEBENCH_CACHE", env["SCALEBENCH_CACHE"])
        for solver in solvers:
            timed_calibration(Configuration("tomography_2d", dataset, "pnp", solver,
                                            "image_size"))
    config = config_file(tmp_path, dataset=[{"tomography_2d": dataset}],
                         solver=[{"pnp": {**solvers[0], "step_size": [0.1, 0.2]}}])
    result = run_cli("plan", config, "--allocation-time", holding_8_s, "--format", "json",
                     env=env)
    assert result.returncode == 0, result.stderr
    allocations = json.loads(result.stdout)["allocations"]
    assert allocations["allocations"] == 2 and allocations["too_long"] == []
    short = run_cli("plan", config, "--allocation-time", holding_3_s, env=env)
    assert short.returncode == 0, short.stderr
    assert f"allocations of {3 + window_s} s: 2 needed" in short.stdout
    assert short.stderr.count(f"is longer than the 3 s one allocation of {3 + window_s} s "
                              f"holds before its time limit's signal") == 2
    strict = run_cli("plan", config, "--allocation-time", holding_3_s, "--strict", env=env)
    assert strict.returncode == 2 and strict.stdout == ""
    assert strict.stderr.count("scalebench: error: job ") == 2
    bad = run_cli("plan", config, "--allocation-time", "soon", env=env)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "scalebench: error: --allocation-time: 'soon' is not a positive duration (give a "
        "number with a unit s, min, h or d (90min, 2h30m, 1d), MM:SS, HH:MM:SS or "
        "D-HH:MM:SS; a bare number counts seconds)"]
