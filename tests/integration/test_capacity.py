"""`scalebench capacity` with real probes in fresh processes: calibrations cached, the largest
size run within its budget, one line per rank count, bad input, the report's capacity view."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from scalebench.planning.capacity.calibration import HEADROOM
from scalebench.planning.capacity.model import PHASES, TERMS
from scalebench.planning.capacity.refine import OVERRUN_ROUNDS
from scalebench.rank.names import HOST_PEAK_SINCE_RESET
from scalebench.rank.profiling import HostPeakMemory
from tests.support.cli import run_cli

MIB = 2**20


@pytest.fixture(scope="module", autouse=True)
def capacity_cache(tmp_path_factory):
    """The module's calibrations in a cache of their own: plan and run read calibrations, and
    the other modules on this worker must not find these."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCALEBENCH_CACHE", str(tmp_path_factory.mktemp("capacity-cache")))
        yield


@pytest.fixture(scope="module")
def denoising_config(tmp_path_factory):
    """A synthetic denoising grid of two denoisers, TV and DnCNN (random weights: memory does
    not depend on their values), at an image_size the capacity ignores."""
    path = tmp_path_factory.mktemp("capacity") / "denoising.yml"
    path.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"synthetic": {"task": "denoising", "image_size": 4096}}],
        "solver": [{"denoiser": {"denoiser": ["tv", "dncnn"], "pretrained": "none",
                                 "device": "cpu", "max_iter": 5}}]}))
    return path


@pytest.fixture(scope="module")
def calibrated(denoising_config):
    """`scalebench capacity` with a budget everything fits: the calibrations, now cached."""
    result = run_cli("capacity", denoising_config, "--memory", "64GiB", "--calibration-size",
                     "64", "--format", "json", "--quick")
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_each_configuration_is_calibrated_once_then_read_from_the_cache(calibrated,
                                                                        denoising_config):
    assert [line["label"].split(" x ")[1] for line in calibrated] == [
        "denoiser[denoiser=tv,device=cpu,max_iter=5,pretrained=none]",
        "denoiser[denoiser=dncnn,device=cpu,max_iter=5,pretrained=none]"]
    assert [line["cached"] for line in calibrated] == [False, False]
    # DnCNN on the CPU adds its regime probe: 64 maps of 444^2 floats, 1.5x glibc's largest
    # mmap threshold (calibration.regime_size). TV's peaks at 16-64 grow by less than the
    # probes' noise: its calibration goes on at twice the largest size until they grow more.
    tv_sizes, dncnn_sizes = (line["calibration_sizes"] for line in calibrated)
    assert dncnn_sizes == [16, 32, 48, 64, 444]
    assert tv_sizes[:4] == [16, 32, 48, 64] and tv_sizes[4:] == [128, 256, 512][:len(tv_sizes) - 4]
    again = run_cli("capacity", denoising_config, "--memory", "64GiB", "--calibration-size",
                    "64", "--format", "json", "--quick")
    assert [line["cached"] for line in json.loads(again.stdout)] == [True, True]
    assert all(line["quick"] and line["refinement"] == [] for line in calibrated)


def test_predicted_largest_size_runs_within_the_budget(calibrated, denoising_config):
    """The budget a little above the DnCNN line's baseline: its largest predicted size keeps
    the headroom, is run once, and its measured peak is within the budget and 15 % of the
    prediction."""
    dncnn = calibrated[1]
    budget = int(dncnn["baseline_bytes"] + 160 * MIB)
    result = run_cli("capacity", denoising_config, "--memory", f"{budget}B",
                     "--calibration-size", "64", "--format", "json", "--verify", "--quick")
    assert result.returncode == 0, result.stderr[-2000:]
    line = json.loads(result.stdout)[1]
    floor = line["floor_bytes"]
    assert floor <= line["baseline_bytes"]
    assert line["predicted_peak_bytes"] <= floor + (1 - HEADROOM) * (budget - floor)
    assert line["measured_peak_bytes"] <= budget
    assert line["predicted_peak_bytes"] == pytest.approx(line["measured_peak_bytes"], rel=0.15)
    assert line["verified_ratio"] == line["predicted_peak_bytes"] / line["measured_peak_bytes"]
    assert set(line["terms"]) == set(TERMS) and line["dominant_term"] in TERMS
    assert line["dominant_phase"] in PHASES


@pytest.fixture(scope="module")
def tv_config(tmp_path_factory):
    """The TV line of ``denoising_config`` alone: the same configuration, so its first
    calibration is the one ``calibrated`` cached."""
    path = tmp_path_factory.mktemp("capacity") / "tv.yml"
    path.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"synthetic": {"task": "denoising", "image_size": 4096}}],
        "solver": [{"denoiser": {"denoiser": "tv", "pretrained": "none", "device": "cpu",
                                 "max_iter": 5}}]}))
    return path


def test_refinement_probes_near_the_answer_and_verifies_within_15_percent(calibrated,
                                                                          tv_config):
    """TV denoising with 600 MiB above its baseline: its first calibration stops at a few
    hundred pixels a side, the answer is above 1000. Refined by real probes in fresh
    processes, the answer's largest probe is at half its unknowns or nearer, each round's
    probes ran within the budget, and the answer's peak, measured, is within the budget and
    15 % of the prediction. Asked again, the refined calibration comes from the cache."""
    tv = calibrated[0]
    budget = int(tv["baseline_bytes"] + 600 * MIB)
    arguments = ("capacity", tv_config, "--memory", f"{budget}B", "--calibration-size", "64")
    result = run_cli(*arguments, "--format", "json", "--verify")
    assert result.returncode == 0, result.stderr[-2000:]
    line, = json.loads(result.stdout)
    assert not line["quick"] and not line["cached"] and line["refinement"]
    assert line["probe_fraction"] >= 0.4
    refining = [probe for probe in line["probes"] if probe[3]]
    assert sorted(probe[0] for probe in refining) == \
        sorted(size for item in line["refinement"] for size in item["sizes"])
    # The planned probes ran within the budget; an overrun round is a verification whose
    # whole run exceeded it (at most refine.OVERRUN_ROUNDS), refined on and answered again.
    planned = {size for item in line["refinement"] if not item["overrun"]
               for size in item["sizes"]}
    overruns = [item for item in line["refinement"] if item["overrun"]]
    assert all(probe[1] <= budget for probe in refining if probe[0] in planned)
    assert len(overruns) == line["overrun_rounds"] <= OVERRUN_ROUNDS
    assert all(item["measured_bytes"] > budget for item in overruns)
    assert line["largest_size"] > tv["calibration_sizes"][-1]
    assert line["measured_peak_bytes"] <= budget
    assert 0.85 <= line["verified_ratio"] <= 1.15, line
    assert line["calibration_seconds"] > 0
    text = run_cli(*arguments)
    assert text.returncode == 0, text.stderr[-2000:]
    rounds = len(line["refinement"])
    assert f"1 rank: up to image_size {line['largest_size']}, predicted " in text.stdout
    assert f"; refined in {rounds} round{'s' * (rounds != 1)}, largest probe at " \
        f"{line['probe_fraction']:.2g} of its unknowns; calibration " in text.stdout
    assert text.stdout.splitlines()[1].endswith(", cached)")


def test_a_time_budget_binds_below_the_memory_answer_and_verifies_its_times(calibrated,
                                                                           tv_config):
    """The refined TV calibration (cached by the test above, else made now) answers a time
    budget of half its predicted run at the memory answer: a smaller size, where time binds,
    whose run is predicted within the budget; run whole at it, its seconds per iteration and
    set-up are measured beside the predictions, and their ratios reported."""
    tv = calibrated[0]
    budget = int(tv["baseline_bytes"] + 600 * MIB)
    arguments = ("capacity", tv_config, "--memory", f"{budget}B", "--calibration-size", "64",
                 "--format", "json")
    memory = run_cli(*arguments)
    assert memory.returncode == 0, memory.stderr[-2000:]
    line, = json.loads(memory.stdout)
    model = line["time_model"]
    assert {term["name"] for term in model["terms"]} >= {"denoise", "set-up", "evaluation"}
    assert all(term["kind"] in ("linear", "power law + constant", "piecewise")
               for term in model["terms"])
    assert line["iterations"] == 5 and line["evaluations"] == 6
    assert line["predicted_run_s"] > 5 * line["predicted_iteration_s"]
    assert len(line["time_probes"]) >= 4 and line["time_curve"]
    limit = line["predicted_run_s"] / 2
    timed = run_cli(*arguments, "--time", f"{limit:.3f}s", "--verify")
    assert timed.returncode == 0, timed.stderr[-2000:]
    answer, = json.loads(timed.stdout)
    assert answer["binding"] == "time" and answer["largest_size"] < line["largest_size"]
    # the model's held-out error is kept as a margin under the budget
    assert answer["time_margin"] == answer["time_model"]["held_out_error"] >= 0
    assert answer["predicted_run_s"] * (1 + answer["time_margin"]) <= limit
    # How near: tools.time_check on quieter cores (docs/performance.md, 0.8-1.25 and
    # 0.7-1.4, and the committed record's unit test); here, that the whole run's figures are
    # the ones compared, within a bound the suite's load on two shared cores leaves room for.
    ratios = answer["verified_time_ratios"]
    assert all(1 / 3 <= ratio <= 3 for ratio in ratios.values()), ratios
    assert answer["measured_iteration_s"] > 0 and answer["measured_setup_s"] > 0
    assert ratios == {"iteration": pytest.approx(answer["predicted_iteration_s"]
                                                 / answer["measured_iteration_s"]),
                      "setup": pytest.approx(answer["predicted_setup_s"]
                                             / answer["measured_setup_s"])}
    text = run_cli(*arguments[:-2], "--time", f"{limit:.3f}s")
    assert text.returncode == 0, text.stderr[-2000:]
    assert f"up to image_size {answer['largest_size']} (time binds), predicted " in text.stdout
    assert "s per iteration (denoise " in text.stdout and "; time binds (time budget" \
        in text.stdout
    assert f"), a {answer['time_margin']:.0%} margin kept under it for the model's held-out " \
           f"error" in text.stdout


@pytest.mark.parametrize(("arguments", "message"), [
    (("--memory", "8GiB", "--time", "soon"), "--time: 'soon' is not a positive duration"),
    (("--time", "0"), "--time: '0' is not a positive duration"),
    (("--time=-2h",), "--time: '-2h' is not a positive duration"),
    (("--memory", "8GiB", "--time", "1h", "--quick"), "--time with --quick: a time budget is "
                                                      "answered from probes near the answer"),
    ((), "scalebench capacity needs a budget: --memory, --time or both"),
])
def test_a_bad_time_budget_is_one_line_exit_2_and_writes_nothing(tmp_path, arguments, message):
    config = tmp_path / "fresh.yml"  # never calibrated: any probe would write its cache
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"synthetic": {"task": "denoising", "image_size": 24}}],
        "solver": [{"denoiser": {"denoiser": "tv", "device": "cpu", "max_iter": 3}}]}))
    cache = tmp_path / "cache"
    result = run_cli("capacity", config, *arguments, env={"SCALEBENCH_CACHE": str(cache)})
    assert result.returncode == 2, result.stdout
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert result.stdout == "" and not cache.exists()


def test_text_lines_name_the_size_the_peak_and_the_dominant_term(calibrated,
                                                                 denoising_config):
    result = run_cli("capacity", denoising_config, "--memory", "64GiB", "--calibration-size",
                     "64", "--quick")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0] == ("largest image_size within 64GiB per rank (host memory; 20% of it "
                        "above the process's measured floor kept free):")
    # DnCNN's line: TV's calibration is extended as far as its noisy peaks need, so its
    # sizes and even whether it grows within 8x vary from run to run.
    size = calibrated[1]["largest_size"]
    dncnn = next(index for index, line in enumerate(lines) if "denoiser=dncnn" in line)
    assert f"1 rank: up to image_size {size}, predicted " in lines[dncnn]
    assert "dominated by per unknown in the iterations (calibrated at 16, 32, 48, 64, 444; " \
        f"quick, largest probe at {444**2 / size**2:.2g} of its unknowns; calibration " \
        in lines[dncnn] and lines[dncnn].endswith(", cached)")
    # Under it, the time model's run at that size, and how far past its probes it is.
    assert lines[dncnn + 1].startswith("    time: predicted ") and \
        " s per iteration (denoise " in lines[dncnn + 1] and \
        "5 iterations and 6 evaluations in " in lines[dncnn + 1] and \
        f"extrapolates {size**2 / 444**2:.2g}x past the largest probe" in lines[dncnn + 1]


@pytest.mark.parametrize(("arguments", "message"), [
    (("--memory", "lots"), "--memory: 'lots' is not a memory size: give a positive number "
                           "with a unit K, M, G or T (binary, e.g. 80GiB, 512M), or bare "
                           "bytes"),
    (("--memory", "8GiB", "--size-parameter", "image_side"),
     "dataset 'synthetic' has no size parameter 'image_side' (its integer parameters: "
     "image_size, channels, ndim, factor, seed); choose one with --size-parameter"),
    (("--memory", "1MiB", "--calibration-size", "64"), "the budget 0.00 GiB is below the "
                                                       "process's measured floor"),
])
def test_bad_capacity_input_is_one_line_exit_2(calibrated, denoising_config, arguments,
                                               message):
    result = run_cli("capacity", denoising_config, *arguments)
    assert result.returncode == 2, result.stdout
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_a_training_config_is_refused(tmp_path):
    config = tmp_path / "training.yml"
    config.write_text(yaml.safe_dump({"objective": ["supervised_training"],
                                      "dataset": [{"synthetic": {}}],
                                      "solver": [{"unrolled_pnp": {}}]}))
    result = run_cli("capacity", config, "--memory", "8GiB")
    assert result.returncode == 2
    assert "scalebench capacity covers the inference benchmark's experiments" in result.stderr


def test_ranks_as_a_parameter_give_a_line_per_rank_count_from_one_calibration(tmp_path):
    config = tmp_path / "ranks.yml"
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"tomography_2d": {"num_angles": 32, "num_operators": 4,
                                       "projector": "astra"}}],
        "solver": [{"pnp": {"device": "cpu", "distribute_physics": True,
                            "slurm_ntasks_per_node": [1, 4]}}]}))
    result = run_cli("capacity", config, "--memory", "8GiB", "--calibration-size", "64",
                     "--format", "json", "--quick")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = json.loads(result.stdout)
    assert [(line["ranks"], line["cached"]) for line in lines] == [(1, False), (4, True)]
    # a rank holding a quarter of the sinograms fits at least as large an image
    assert lines[1]["largest_size"] >= lines[0]["largest_size"]
    text = run_cli("capacity", config, "--memory", "8GiB", "--calibration-size", "64",
                   "--quick")
    assert "  with 4 ranks: up to image_size " in text.stdout, text.stderr


def test_a_second_algorithm_of_one_operator_and_denoiser_probes_two_sizes(tmp_path):
    """CT under proximal gradient and half-quadratic splitting: the first calibrates whole,
    the second probes the two largest sizes itself, borrows the others, says so, and times
    its own steps (the data prox, no gradient)."""
    config = tmp_path / "algorithms.yml"
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"tomography_2d": {"num_angles": 32, "projector": "astra"}}],
        "solver": [{"pnp": {"device": "cpu", "algorithm": ["pgd", "hqs"]}}]}))
    result = run_cli("capacity", config, "--memory", "8GiB", "--calibration-size", "64",
                     "--format", "json", "--quick")
    assert result.returncode == 0, result.stderr[-2000:]
    pgd, hqs = json.loads(result.stdout)
    assert (pgd["shared_probes"], hqs["shared_with"]) == (0, ["pgd"])
    assert hqs["shared_probes"] == len(pgd["probes"]) - 2 == len(hqs["probes"]) - 2
    assert hqs["calibration_sizes"] == pgd["calibration_sizes"]
    steps = {name: [term["name"] for term in line["time_model"]["terms"]]
             for name, line in (("pgd", pgd), ("hqs", hqs))}
    assert "grad" in steps["pgd"] and "prox" not in steps["pgd"]
    assert "prox" in steps["hqs"] and "grad" not in steps["hqs"]
    assert hqs["largest_size"] > 0
    text = run_cli("capacity", config, "--memory", "8GiB", "--calibration-size", "64",
                   "--quick")
    assert f"{hqs['shared_probes']} of its {len(hqs['probes'])} probes shared with pgd, " \
        "cached" in text.stdout, text.stdout


def test_a_parallel_config_gives_the_ranks_its_jobs_ask_for(tmp_path):
    config = tmp_path / "split.yml"
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"tomography_2d": {"num_angles": 32, "num_operators": 4,
                                       "projector": "astra"}}],
        "solver": [{"pnp": {"device": "cpu", "distribute_physics": True}}]}))
    parallel = tmp_path / "submitit.yml"
    parallel.write_text(yaml.safe_dump({"backend": "submitit", "slurm_nodes": 2,
                                        "slurm_ntasks_per_node": 2}))
    result = run_cli("capacity", config, "--memory", "8GiB", "--calibration-size", "64",
                     "--parallel-config", parallel, "--format", "json", "--quick")
    assert result.returncode == 0, result.stderr[-2000:]
    line, = json.loads(result.stdout)
    assert line["ranks"] == 4 and line["largest_size"] > 0
    both = run_cli("capacity", config, "--memory", "8GiB", "--nproc", "2",
                   "--parallel-config", parallel)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


@pytest.fixture(scope="module")
def capacity_report(calibrated, tmp_path_factory):
    """Real DnCNN runs at two sizes of the calibrated configuration, and their report with
    the capacity answers."""
    from scalebench.results.report.capacity import load_capacity
    from scalebench.results.report.data import load_results

    folder = tmp_path_factory.mktemp("capacity-report")
    config = folder / "runs.yml"
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"synthetic": {"task": "denoising", "image_size": [32, 64]}}],
        "solver": [{"denoiser": {"denoiser": "dncnn", "pretrained": "none", "device": "cpu",
                                 "max_iter": 2}}]}))
    run = run_cli("run", config, "--no-html", "--output", "runs", "--outputs", folder)
    assert run.returncode == 0, run.stderr[-2000:]
    answers = folder / "capacity.json"
    answers.write_text(json.dumps(calibrated))
    page = run_cli("report", folder / "runs.parquet", "--capacity", answers, "-o",
                   folder / "report.html")
    assert page.returncode == 0, page.stderr[-2000:]
    results = load_results([folder / "runs.parquet"])
    results.capacity = load_capacity([answers])
    return results, (folder / "report.html").read_text(), answers


def test_the_capacity_view_draws_probes_model_budget_largest_size_and_runs(capacity_report):
    from scalebench.results.report.capacity import capacity
    from tests.support.figure_layout import layout_faults

    results, page, _ = capacity_report
    view = capacity(results)
    assert "Capacity: peak memory and time vs size, models and budgets" in page
    tv, dncnn = view.summary.rows
    assert dncnn[8] == "32, 64" and tv[8] == "-"  # the runs found for each configuration
    answer = results.capacity[1]
    assert dncnn[4] == str(answer["largest_size"])
    # Each answer's row of panels: memory, then time.
    axis, timing = view.figure.axes[2:4]
    probes, = [c for c in timing.collections if c.get_label().startswith("probes: s per")]
    assert len(probes.get_offsets()) == len(answer["time_probes"])
    per_iteration, = [line for line in timing.get_lines()
                      if line.get_label() == "time model: s per iteration"]
    assert list(per_iteration.get_ydata()) == [c[2] for c in answer["time_curve"]]
    assert dncnn[11] == f"{answer['predicted_iteration_s']:.3g}"
    model, = [line for line in axis.get_lines() if line.get_label() == "model: predicted peak"]
    assert list(model.get_xdata()) == [size for size, _ in answer["curve"]]
    budget, = [line for line in axis.get_lines() if line.get_label().startswith("memory")]
    assert budget.get_ydata()[0] == pytest.approx(answer["budget_bytes"] / 2**30)
    largest, = [line for line in axis.get_lines() if line.get_label() == "largest fitting size"]
    assert largest.get_xdata()[0] == answer["largest_size"]
    runs, = [c for c in axis.collections if c.get_label().startswith("runs of these")]
    assert sorted(x for x, _ in runs.get_offsets()) == [32, 64]
    probes, = [c for c in axis.collections if c.get_label().startswith("calibration")]
    assert len(probes.get_offsets()) == len(answer["calibration_sizes"])
    assert layout_faults(view.figure) == []


def test_a_file_that_is_not_a_capacity_answer_is_refused_in_one_line(capacity_report,
                                                                    tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"label": "x"}]))
    results = tmp_path.parent
    result = run_cli("report", capacity_report[2].parent / "runs.parquet", "--capacity", bad,
                     "-o", results / "never.html")
    assert result.returncode == 2 and not (results / "never.html").exists()
    assert result.stderr.strip() == (f"scalebench: error: {bad}: not a capacity file (an "
                                     f"answer has no 'ranks'); give what `scalebench capacity "
                                     f"CONFIG --memory M --format json` prints")


@pytest.mark.skipif(not HostPeakMemory.reset_peak(),
                    reason="the host's peak cannot be reset here (/proc/self/clear_refs): "
                           "both phases read the lifetime peak")
def test_a_probe_measures_the_set_up_and_the_iterations_apart():
    """Radio's set-up (a million visibilities, their transforms) frees its temporaries and
    hands them back when it ends: at 64² its peak is above the iterations', which the probe
    reads from the set-up's end. Measured: 1091 and 1040 MiB, 1098 and 1049 MiB."""
    from scalebench.errors import ScalebenchError
    from scalebench.planning.capacity.probe import probe

    radio = {"num_times": 64, "num_channels": 8, "image_size": 64}
    result = probe("radio_interferometry", radio, "pnp", {"denoiser": "tv", "device": "cpu"})
    setup, iterations = result.peaks_bytes("cpu")
    assert setup - iterations > 20 * MIB
    assert iterations > 200 * MIB  # the process with its libraries, not a step's increase
    assert result.device_peaks_bytes is None
    with pytest.raises(ScalebenchError, match="the probe ran on the CPU: it has no CUDA peak"):
        result.peaks_bytes("cuda")


def test_a_probe_counts_its_own_peak_not_the_one_of_the_process_that_started_it():
    """A process started by another inherits its high-water mark in ru_maxrss (Linux): the
    probe reads its own (VmHWM), so a launcher that once held a lot changes no figure."""
    import torch

    from scalebench.planning.capacity.probe import probe

    parent_peak = torch.ones(768 * MIB)  # 3 GiB, written: resident in this process
    del parent_peak
    result = probe("tomography_2d", {"image_size": 16, "num_angles": 8}, "pnp",
                   {"denoiser": "tv", "device": "cpu"})
    assert max(result.host_peaks_bytes) < 2 * 2**30, result
    assert result.host_method == HOST_PEAK_SINCE_RESET


def test_two_concurrent_calibrations_of_one_configuration_both_succeed(tmp_path):
    """Two `scalebench capacity` processes calibrating the same configuration at once into one
    cache: both answer, and the cache holds one whole entry per file, no temporary left."""
    config = tmp_path / "tv.yml"
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"synthetic": {"task": "denoising", "image_size": 64}}],
        "solver": [{"denoiser": {"denoiser": "tv", "device": "cpu", "max_iter": 2}}]}))
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "scalebench", "capacity", str(config), "--memory", "8GiB",
               "--calibration-size", "32", "--format", "json", "--quick"]
    env = {**os.environ, "SCALEBENCH_CACHE": str(cache)}
    writers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env) for _ in range(2)]
    done = [writer.communicate(timeout=600) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], [err[-2000:] for _, err in done]
    # Each answers from its own probes or the other's entry (their peaks differ by the noise).
    assert [len(json.loads(out)) for out, _ in done] == [1, 1]
    entries = sorted(path for path in (cache / "capacity").rglob("*") if path.is_file())
    assert entries and all(path.suffix == ".json" for path in entries), entries
    for path in entries:
        json.loads(path.read_text())  # whole: one writer's record
