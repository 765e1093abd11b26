"""`scalebench plan` in-process: exact job lists of the shipped configs, resources from the
parallel config, every invalid case refused before anything is submitted, memory per rank."""

from __future__ import annotations

import json
import math
import re

import pytest
import yaml

from scalebench.errors import ConfigError, ScalebenchError
from scalebench.planning import plan as plan_module
from scalebench.planning.plan import format_text, make_plan
from tests.support.paths import BENCHMARK
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

# The node the memory tests plan for (the test machine's size; a larger host would fit more).
NODE_MEMORY_BYTES = 24 * 2**30


def test_shipped_default_and_example_configs_give_their_exact_job_lists():
    assert jobs_of(plan_of(CONFIGS / "default.yml"), ("image_size",), ("algorithm", "denoiser")) \
        == [("tomography_2d", (128,), "fbp", (None, None), 1),
            ("tomography_2d", (128,), "pnp", ("pgd", "tv"), 1),
            ("tomography_2d", (128,), "pnp", ("drs", "tv"), 1),
            ("tomography_2d", (128,), "denoiser", (None, "tv"), 1)]
    assert jobs_of(plan_of(CONFIGS / "examples" / "tomography_2d.yml"), ("num_angles",),
                 ("denoiser",)) == [("tomography_2d", (180,), "pnp", ("tv",), 1),
                                    ("tomography_2d", (180,), "pnp", ("drunet",), 1)]
    assert jobs_of(plan_of(CONFIGS / "examples" / "multiframe_superres.yml"), ("image_size",),
                 ("denoiser",)) == [("multiframe_superres", (512,), "pnp", ("tv",), 1),
                                    ("multiframe_superres", (512,), "denoiser", ("tv",), 1),
                                    ("multiframe_superres", (512,), "denoiser", ("dncnn",), 1)]
    assert jobs_of(plan_of(CONFIGS / "examples" / "synthetic.yml"), ("image_size",),
                 ("denoiser",)) == [("synthetic", (size,), "pnp", ("drunet",), 1)
                                    for size in (512, 1024, 2048)]


def test_shipped_scaling_configs_give_their_exact_job_lists():
    strong = plan_of(CONFIGS / "scaling" / "strong_scaling.yml")
    assert jobs_of(strong, ("num_angles",), ("slurm_ntasks_per_node",)) == [
        ("tomography_2d", (256,), "pnp", (n,), n) for n in (1, 2, 4, 8)]
    weak = plan_of(CONFIGS / "scaling" / "weak_scaling.yml")
    assert jobs_of(weak, ("num_angles",), ()) == [
        ("tomography_2d", (angles,), "pnp", (), ranks)
        for angles in (128, 256, 512) for ranks in (2, 4, 8)]
    communication = plan_of(CONFIGS / "scaling" / "communication.yml")
    assert jobs_of(communication, (), ("distribute_physics", "distribute_denoiser")) == [
        ("multiframe_superres", (), "pnp", pair, 2)
        for pair in ((True, False), (False, True), (True, True))]
    compiled = plan_of(CONFIGS / "scaling" / "compile.yml")
    assert jobs_of(compiled, (), ("denoiser", "compile")) == [
        ("multiframe_superres", (), "pnp", (d, c), 1)
        for d in ("dncnn", "drunet") for c in (False, True)]
    tiling = plan_of(CONFIGS / "scaling" / "tiling.yml")
    assert jobs_of(tiling, (), ("tile_size", "tile_overlap")) == [
        ("synthetic", (), "denoiser", pair, 2)
        for pair in ((64, 8), (64, 16), (128, 8), (128, 16), (256, 16))]


def test_submitit_plan_takes_time_limits_and_commands_from_the_parallel_config():
    plan = plan_of(CONFIGS / "scaling" / "strong_scaling.yml", SUBMITIT)
    assert [(j.nodes, j.ntasks_per_node, j.time_limit_s) for j in plan.jobs] == [
        (1, n, 7200.0) for n in (1, 2, 4, 8)]
    assert plan.jobs[0].command == ["benchopt", "run", str(BENCHMARK), "--config",
                                    str(CONFIGS / "scaling" / "strong_scaling.yml"),
                                    "--parallel-config", str(SUBMITIT)]
    totals = plan.to_json()["totals"]
    assert totals["jobs"] == 4 and totals["cpu_core_hours"] == pytest.approx(2 * 15)
    assert all(j.rank_memory_bytes > 2**29 for j in plan.jobs)
    # fewer operators per rank: less memory per rank
    memory = [j.rank_memory_bytes for j in plan.jobs]
    assert memory == sorted(memory, reverse=True)


def test_a_benchmark_folder_given_to_plan_is_in_its_local_commands(tmp_path):
    folder = tmp_path / "my_benchmark"
    plan = make_plan(CONFIGS / "default.yml", None, 1, folder)
    assert {tuple(job.command) for job in plan.jobs} == {
        ("scalebench", "run", str(CONFIGS / "default.yml"), "--benchmark", str(folder),
         "--nproc", "1")}


def test_a_local_auto_device_counts_gpus_where_the_machine_has_them(tmp_path, monkeypatch):
    import torch

    config = config_file(tmp_path, solver=pnp(device="auto", distribute_physics=True))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [job.gpus_per_node for job in make_plan(config, None, 2).jobs] == [0]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert [job.gpus_per_node for job in make_plan(config, None, 2).jobs] == [2]


def test_a_config_with_the_other_benchmark_folder_is_refused():
    with pytest.raises(ScalebenchError, match="objective is run by benchmark_training"):
        make_plan(CONFIGS / "training" / "example.yml", None, 1, BENCHMARK)


def test_suggestions_commented_in_the_shipped_parallel_config_are_accepted(tmp_path):
    """Its commented-out slurm_ lines, uncommented, still give a plan without problems."""
    text = SUBMITIT.read_text()
    uncommented = re.sub(r"^# (slurm_\w+:)", r"\1", text, flags=re.MULTILINE)
    assert uncommented != text
    parallel = tmp_path / "submitit.yml"
    parallel.write_text(uncommented)
    assert plan_of(CONFIGS / "scaling" / "strong_scaling.yml", parallel).errors == []


def test_plan_writes_one_config_per_job_that_runs_it_alone(tmp_path):
    plan = make_plan(CONFIGS / "default.yml", None, 1, configs=tmp_path / "jobs")
    for job in plan.jobs:
        config = tmp_path / "jobs" / f"{job.id}.yml"
        assert job.command == ["scalebench", "run", str(config), "--nproc", "1"]
        assert yaml.safe_load(config.read_text())["solver"] == [job.solver]


def command_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "command" in line]


def test_a_local_plan_says_once_that_one_command_runs_every_job_on_its_ranks():
    """`scalebench run CONFIG --nproc 1` runs the four jobs in turn, each on the ranks its
    solver names: one command, not four jobs' copies of it."""
    config = CONFIGS / "scaling" / "strong_scaling.yml"
    plan = make_plan(config, None, 1)
    assert [job.ranks for job in plan.jobs] == [1, 2, 4, 8]
    assert command_lines(format_text(plan)) == [
        f"command (runs every job above in turn, each on its ranks): scalebench run {config} "
        f"--nproc 1"]


def test_a_submitit_plan_says_once_that_benchopt_submits_every_job():
    config = CONFIGS / "scaling" / "strong_scaling.yml"
    assert command_lines(format_text(plan_of(config, SUBMITIT))) == [
        f"command (submits every job above, each with its resources): benchopt run "
        f"{BENCHMARK} --config {config} --parallel-config {SUBMITIT}"]


def test_a_plan_with_one_config_per_job_gives_each_job_its_own_command(tmp_path):
    plan = make_plan(CONFIGS / "scaling" / "strong_scaling.yml", None, 1,
                     configs=tmp_path / "jobs")
    assert command_lines(format_text(plan)) == [
        f"{'':16}  command: scalebench run {tmp_path / 'jobs' / job.id}.yml --nproc 1"
        for job in plan.jobs]


@pytest.mark.parametrize("overrides, message", [
    ({"unknown_key": 1}, "unknown config key 'unknown_key'"),
    ({"solver": pnp(max_iter="ten")}, "parameter 'max_iter' must be an integer"),
    ({"solver": pnp(distribute_physics=True, slurm_ntasks_per_node=4)},
     "distribute_physics: 2 operator(s) for 4 ranks"),
    ({"solver": [{"denoiser": {"distribute_denoiser": True, "tile_size": 16,
                               "slurm_ntasks_per_node": 8, "device": "cpu"}}]},
     "distribute_denoiser: 4 tile(s) in 1 batch(es) of tiles_per_batch 4 for 8 ranks"),
])
def test_invalid_experiments_are_refused(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_of(config_file(tmp_path, **overrides))


@pytest.mark.parametrize("keys, message", [
    ({"slurm_partiton": "debug"}, "unknown key 'slurm_partiton'"),
    ({"partition": "debug"}, "unknown key 'partition'"),
    ({"slurm_nodes": "two"}, "'slurm_nodes' must be a positive integer"),
    ({"slurm_time": "two hours"}, "is not a SLURM time"),
    ({"slurm_time": "2h"}, "'2h' is not a SLURM time limit .*SLURM reads no units"),
    ({"slurm_mem": "lots"}, "'lots' is not a memory size: give a positive number"),
])
def test_invalid_parallel_configs_are_refused(tmp_path, keys, message):
    with pytest.raises(ConfigError, match=message):
        plan_of(config_file(tmp_path, solver=pnp()), parallel_file(tmp_path, **keys))


def test_parallel_config_must_submit_through_submitit(tmp_path):
    loky = tmp_path / "loky.yml"
    loky.write_text("backend: loky\nn_jobs: 2\n")
    with pytest.raises(ConfigError, match="'backend: submitit'"):
        plan_of(config_file(tmp_path), loky)


def test_uncalibrated_memory_is_a_lower_bound_and_refuses_only_what_cannot_fit(
        tmp_path, monkeypatch):
    """Without a calibration a rank counts its process baseline and two images: CT at 8192²
    plans (a rank holds a few GiB), a synthetic image of 10^10 pixels is refused."""
    from scalebench.planning.memory import CERTAIN_IMAGES, FLOAT_BYTES, PROCESS_BASELINE_BYTES

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(plan_module, "machine_memory_bytes", lambda: NODE_MEMORY_BYTES)
    large = [{"tomography_2d": {"image_size": 8192, "num_angles": 2048}}]
    plan = plan_of(config_file(tmp_path, dataset=large, solver=pnp()))
    assert plan.errors == []
    job, = plan.jobs
    assert job.memory_model == "uncalibrated"
    assert job.rank_memory_bytes == PROCESS_BASELINE_BYTES + CERTAIN_IMAGES * 8192**2 * \
        FLOAT_BYTES
    text = format_text(plan)
    assert ">=1." in text and "'>=' marks an uncalibrated lower bound" in text
    huge = [{"synthetic": {"image_size": 100000}}]
    refused = plan_of(config_file(tmp_path, dataset=huge, solver=pnp()))
    assert len(refused.errors) == 1 and "uncalibrated lower bound) is above the node's" in \
        refused.errors[0]


def test_a_calibrated_configuration_plans_with_its_prediction(tmp_path, monkeypatch):
    """A calibration in the cache (the file `scalebench capacity` writes) gives the job its
    predicted peak, which refuses what the model says cannot fit."""
    from scalebench.planning.capacity.calibration import probe_sizes
    from scalebench.planning.capacity.calibration_cache import cache_path
    from scalebench.planning.capacity.configuration import Configuration
    from scalebench.planning.capacity.model import MemoryModel

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(plan_module, "machine_memory_bytes", lambda: NODE_MEMORY_BYTES)
    dataset = {"image_size": 8192, "num_angles": 2048}
    solver = {"max_iter": 2, "device": "cpu"}
    configuration = Configuration("tomography_2d", dataset, "pnp", solver, "image_size")
    model = MemoryModel(((2**30, 0.0, 0.0, 0.0, 0.0), (2**30, 400.0, 0.0, 0.0, 0.0)), 0.0,
                        0.0, ())
    path = cache_path(configuration, probe_sizes(configuration))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(model.to_json()))
    plan = plan_of(config_file(tmp_path, dataset=[{"tomography_2d": dataset}],
                         solver=[{"pnp": solver}]))
    job, = plan.jobs
    assert job.memory_model == "calibrated"
    assert job.rank_memory_bytes == int(2**30 + 400.0 * 8192**2)
    assert len(plan.errors) == 1 and "GiB, calibrated) is above the node's" in \
        plan.errors[0]


def test_each_repetition_is_a_job_of_its_own_under_submitit_and_one_process_locally(tmp_path):
    """benchopt's submitit backend submits one job per repetition, each bounded by slurm_time
    (else 1.5 x the timeout); a local run runs every repetition in one process."""
    config = config_file(tmp_path, **{"n-repetitions": 2, "timeout": "10m"},
                         solver=pnp(slurm_gres="gpu:1"))
    parallel = parallel_file(tmp_path, slurm_time="00:10:00", slurm_nodes=1,
                             slurm_ntasks_per_node=1)
    submitted = plan_of(config, parallel)
    assert submitted.errors == []  # a 10 min limit fits each 10 min repetition
    job, = submitted.jobs
    assert (job.submissions, job.time_limit_s) == (2, 600)
    assert job.gpu_hours == pytest.approx(2 * 600 / 3600)
    assert "2 x 0.17 h" in format_text(submitted)
    too_short = plan_of(config, parallel_file(tmp_path, slurm_time="00:05:00"))
    assert len(too_short.errors) == 1 and "time limit 300 s is shorter than the solver " \
        "timeout (600 s)" in too_short.errors[0]
    local, = plan_of(config).jobs
    assert (local.submissions, local.time_limit_s) == (1, 1200)


def test_auto_takes_cuda_only_where_there_is_a_device_and_cuda_stays_cuda_for_a_plan():
    import torch

    from scalebench.rank.devices import device_type

    assert device_type("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert device_type("cpu") == "cpu"
    assert device_type("cuda") == "cuda"  # a plan may be for a machine with GPUs


def test_a_time_calibrated_job_is_predicted_start_up_set_up_iterations_and_evaluations(
        tmp_path, monkeypatch):
    """Two repetitions in one local process: one start-up, two set-ups of which the first
    computes the operator norm, 10 iterations and 11 evaluations each; 4x the largest probe's
    unknowns, said; a second job on the same data reads the norm the first computed."""
    from scalebench.planning.capacity.configuration import Configuration

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    dataset = {"image_size": 256, "num_angles": 32}
    solvers = [{"max_iter": 10, "device": "cpu", "denoiser": "tv", "step_size": step}
               for step in (0.1, 0.2)]
    for solver in solvers:
        timed_calibration(Configuration("tomography_2d", dataset, "pnp", solver, "image_size"))
    config = config_file(tmp_path, **{"n-repetitions": 2, "timeout": "1h"},
                         dataset=[{"tomography_2d": dataset}],
                         solver=[{"pnp": {**solvers[0], "step_size": [0.1, 0.2]}}])
    plan = plan_of(config)
    first, second = plan.jobs
    run = 1.0 + 10 * 1e-6 * 256**2 + 11 * 0.1  # set-up without the norm, iterations, evaluations
    assert first.time_model == "calibrated"
    assert first.predicted_s == pytest.approx(2.0 + (run + 0.5) + run)
    assert second.predicted_s == pytest.approx(2.0 + 2 * run)
    assert first.extrapolation == pytest.approx(4.0)
    assert first.predicted_cpu_core_hours == pytest.approx(first.predicted_s / 3600)
    totals = plan.to_json()["totals"]
    assert totals["predicted_jobs"] == 2
    assert totals["predicted_s"] == pytest.approx(first.predicted_s + second.predicted_s)
    text = format_text(plan)
    assert f"{first.predicted_s:.0f} s (x4)" in text
    assert "predicted: (xN) marks a prediction N times past its largest probe" in text
    assert plan.warnings(cores=64) == [] and plan.errors == []


def calibrated_tomography(tmp_path, monkeypatch, **timing) -> tuple[dict, dict]:
    """(dataset, solver) parameters of a 256² CT PnP-TV configuration whose time calibration
    (tests/support/plans.timed_calibration with ``timing``) lies in a fresh cache."""
    from scalebench.planning.capacity.configuration import Configuration

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    dataset = {"image_size": 256, "num_angles": 32}
    solver = {"max_iter": 10, "device": "cpu", "denoiser": "tv"}
    timed_calibration(Configuration("tomography_2d", dataset, "pnp", solver, "image_size"),
                      **timing)
    return dataset, solver


def test_a_time_limit_below_the_prediction_with_its_margin_is_named_with_one_that_would_do(
        tmp_path, monkeypatch):
    """A 10 s timeout for a run predicted at about 70 s: a warning naming a timeout that
    would do (prediction x 1.2), an error with --strict; an uncalibrated job says so."""
    dataset, solver = calibrated_tomography(tmp_path, monkeypatch, grad_per_unknown=1e-4)
    config = config_file(tmp_path, timeout="10s", dataset=[{"tomography_2d": dataset}],
                         solver=[{"pnp": solver}])
    plan = plan_of(config)
    job, = plan.jobs
    needed = math.ceil(job.predicted_s * 1.2)
    warning, = plan.warnings(cores=64)
    assert warning == (f"job {job.id} ({job.label}): time limit 10 s is below its predicted "
                       f"{job.predicted_s:.0f} s with a 20% margin: set the run option "
                       f"timeout to at least {needed}s")
    strict = make_plan(config, None, 1, strict=True)
    assert strict.warnings(cores=64) == [] and strict.errors == [warning]
    other = plan_of(config_file(tmp_path, "o.yml", dataset=[{"tomography_2d": {
        **dataset, "num_angles": 64}}], solver=[{"pnp": solver}]))
    uncalibrated, = other.jobs
    assert uncalibrated.time_model == "not calibrated" and uncalibrated.predicted_s is None
    assert "not calibrated" in format_text(other)


def test_a_norm_the_cache_holds_is_left_out_of_the_prediction_through_a_torch_free_key(
        tmp_path, monkeypatch):
    """The same job predicted with an empty norm cache and after a run noted its norm there:
    the prediction drops the norm's 0.5 s; a note whose entry is gone counts as none."""
    from scalebench.data.norm_lookup import norm_cached, note_entry
    from scalebench.planning.capacity.configuration import Configuration

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    dataset = {"image_size": 256, "num_angles": 32}
    solver = {"max_iter": 10, "device": "cpu", "denoiser": "tv"}
    configuration = Configuration("tomography_2d", dataset, "pnp", solver, "image_size")
    timed_calibration(configuration)
    config = config_file(tmp_path, dataset=[{"tomography_2d": dataset}],
                         solver=[{"pnp": solver}])
    cold, = plan_of(config).jobs
    key = configuration.norm_run_key()
    assert key == {"dataset": "tomography_2d", "params": key["params"], "device": "cpu",
                   "num_threads": 0} and key["params"]["num_angles"] == 32
    entry = tmp_path / "cache" / "operator_norms" / "entry.json"
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps({"norm_squared": 3.5}))
    note_entry(key, entry)
    assert norm_cached(key) and not norm_cached({**key, "num_threads": 2})
    warm, = plan_of(config).jobs
    assert cold.predicted_s - warm.predicted_s == pytest.approx(0.5)
    entry.unlink()
    assert not norm_cached(key) and plan_of(config).jobs[0].predicted_s == cold.predicted_s


def test_the_launch_gets_plans_warning_per_experiment_with_the_timeout_that_would_do(
        tmp_path, monkeypatch):
    """What the expand child hands `scalebench run`: per experiment its timeout, predicted
    run, advised timeout and plan's warning naming it; nothing where no-timeout is set."""
    from scalebench.experiment.config import load_config
    from scalebench.experiment.expand import expand_config
    from scalebench.planning.plan_time import experiment_prediction, launch_time_checks

    dataset, solver = calibrated_tomography(tmp_path, monkeypatch, grad_per_unknown=1e-4)
    config = config_file(tmp_path, timeout="10s", dataset=[{"tomography_2d": dataset}],
                         solver=[{"pnp": solver}, {"pnp": {**solver, "max_iter": 1}}])
    grid = load_config(config, 1)
    experiments = expand_config(grid, tmp_path / "configs")
    normed: set[str] = set()
    for experiment in experiments:  # as the expand child gives them
        experiment["predicted"] = experiment_prediction(experiment, 1, 1, normed)
    checks = launch_time_checks(grid, experiments)
    job, second = plan_of(config).jobs
    long, short = (checks[e["id"]] for e in experiments)
    assert long["predicted_s"] == pytest.approx(job.predicted_s) and long["computes_norm"]
    assert long["advised_timeout_s"] == math.ceil(job.predicted_s * 1.2)
    assert long["warning"] == f"experiment {experiments[0]['id']} ({experiments[0]['label']})" \
                              f": {job.time_warning}"
    assert long["timeout_s"] == 10.0
    # the second reads the norm the first computed, as in plan
    assert short["warning"] is None and not short["computes_norm"]
    assert short["predicted_s"] == pytest.approx(second.predicted_s)
    assert short["predicted_s"] < long["predicted_s"]
    no_limit = load_config(config_file(tmp_path, "n.yml", **{"no-timeout": True},
                                       dataset=[{"tomography_2d": dataset}],
                                       solver=[{"pnp": solver}]), 1)
    assert launch_time_checks(no_limit, expand_config(no_limit, tmp_path / "n")) == {}


def test_a_plan_says_its_predictions_on_several_ranks_leave_communication_out(
        tmp_path, monkeypatch):
    from scalebench.planning.capacity.configuration import Configuration
    from scalebench.planning.capacity.time_model import COMMUNICATION_NOT_INCLUDED

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    dataset = {"image_size": 256, "num_angles": 32, "num_operators": 2}
    solver = {"max_iter": 10, "device": "cpu", "denoiser": "tv"}
    for ranks in (1, 2):  # a calibration per rank count: its operators split in two
        timed_calibration(Configuration("tomography_2d", dataset, "pnp", {
            **solver, "distribute_physics": ranks > 1}, "image_size"))
    config = config_file(tmp_path, dataset=[{"tomography_2d": dataset}],
                         solver=[{"pnp": solver}])
    assert COMMUNICATION_NOT_INCLUDED not in format_text(plan_of(config))
    several = make_plan(config_file(tmp_path, "s.yml", dataset=[{"tomography_2d": dataset}],
                                    solver=[{"pnp": {**solver, "distribute_physics": True}}]),
                        None, 2)
    assert several.jobs[0].predicted_s is not None
    assert f"predicted: {COMMUNICATION_NOT_INCLUDED} for the 1 job(s) on several ranks" in \
        format_text(several)
