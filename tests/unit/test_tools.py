"""The measurement tools' own logic, on the CPU: what tools/measuring.py shares (clocks that
synchronise the device, medians, the table writer, the common arguments), the rules every
script keeps, and the GPU check's in-process checks."""

import ast
import importlib
import io
from types import SimpleNamespace

import pytest
import torch

from tests.support.paths import REPO
from tools import measuring

TOOLS = sorted(path.stem for path in (REPO / "tools").glob("*.py")
               if path.stem not in ("__init__", "measuring"))


def _tool(name):
    return importlib.import_module(f"tools.{name}")


def test_a_stopwatch_synchronises_a_cuda_device_before_it_starts_and_before_it_stops(
        monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    with measuring.Stopwatch(torch.device("cuda", 0)) as watch:
        assert len(calls) == 1  # the queued work done before the clock starts
    assert len(calls) == 2 and all(device == torch.device("cuda", 0) for device in calls)
    assert watch.seconds >= 0.0


def test_timing_on_the_cpu_or_without_a_device_synchronises_nothing(monkeypatch):
    def no_sync(device=None):
        raise AssertionError("synchronised a CPU clock")

    monkeypatch.setattr(torch.cuda, "synchronize", no_sync)
    results = iter(range(3))
    timing = measuring.timed(lambda: next(results), 3, torch.device("cpu"))
    assert timing.result == 2 and len(timing.seconds) == 3
    assert measuring.timed(lambda: "x", 1).result == "x"


def test_timed_synchronises_around_every_call_on_cuda(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    timing = measuring.timed(lambda: None, 3, "cuda")
    assert len(calls) == 6 and len(timing.seconds) == 3
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        measuring.timed(lambda: None, 0)


def test_timed_reports_the_median_of_its_calls():
    assert measuring.Timed([3.0, 1.0, 2.0, 10.0], None).median == 2.5


def test_a_summary_holds_the_median_the_range_and_the_spread():
    figures = measuring.summary([4.0, 1.0, 2.0])
    assert (figures.median, figures.lowest, figures.highest, figures.count) == (2.0, 1.0, 4.0, 3)
    assert figures.relative_spread == 1.5  # (4 - 1) / 2
    assert measuring.median(iter([1, 2, 3, 4])) == 2.5
    with pytest.raises(ValueError, match="no values"):
        measuring.summary([])


def test_the_table_writer_prints_markdown_row_by_row():
    stream = io.StringIO()
    table = measuring.Table("size", "time s", "note", stream=stream)
    table.header()
    table.row(64, "0.125", "a|b")
    table.row("65536", "skipped")
    assert stream.getvalue() == ("| size | time s | note |\n"
                                 "|---|---|---|\n"
                                 "| 64 | 0.125 | a\\|b |\n"
                                 "| 65536 | skipped |  |\n")
    with pytest.raises(ValueError, match="4 cells for the 3 columns size, time s, note"):
        table.row(1, 2, 3, 4)


def test_targets_print_one_line_each_and_give_the_exit_status(capsys):
    assert measuring.print_targets([("speedup", True, "1.90")]) == 0
    assert measuring.print_targets([("speedup", True, "1.90"), ("ratio", False, "0.50")]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "met: speedup: 1.90", "met: speedup: 1.90", "MISSED: ratio: 0.50"]


def test_the_common_arguments_parse_sizes_either_way_and_refuse_a_bad_one(capsys):
    parser = measuring.tool_parser("Doc.", "/repo/tools/some_tool.py")
    measuring.add_sizes(parser, [256])
    measuring.add_repeats(parser, 3)
    measuring.add_device(parser)
    assert parser.prog == "python -m tools.some_tool"
    args = parser.parse_args(["--sizes", "64,128", "512", "--repeats", "2"])
    assert (args.sizes, args.repeats, args.device) == ([64, 128, 512], 2, "cpu")
    assert parser.parse_args([]).sizes == [256]
    for bad in (["--sizes", "0"], ["--sizes", "6x"], ["--repeats", "0"], ["--device", "tpu"]):
        with pytest.raises(SystemExit) as exit:
            parser.parse_args(bad)
        assert exit.value.code == 2
    errors = capsys.readouterr().err
    assert "argument --sizes: must be a positive integer, got '6x'" in errors


def test_threads_zero_leaves_torch_as_it_is(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    measuring.apply_threads(0)
    measuring.apply_threads(3)
    assert calls == [3]


@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_runs_as_a_module_and_says_so(name):
    """Its docstring gives its ``python -m tools.NAME`` command, it builds its parser with the
    shared ``tool_parser`` and leaves sys.path alone."""
    source = (REPO / "tools" / f"{name}.py").read_text()
    tree = ast.parse(source)
    assert f"python -m tools.{name}" in ast.get_docstring(tree)
    assert "sys.path" not in source and "ArgumentParser(" not in source
    assert "tool_parser(__doc__, __file__)" in source


def test_gpu_check_reports_operators_without_a_deterministic_kernel():
    gpu_check = _tool("gpu_check")

    def no_kernel(_):
        raise RuntimeError("grid_sampler_2d_backward_cuda does not have a deterministic "
                           "implementation")
    x = torch.ones(1, 1, 4, 4)
    problem = SimpleNamespace(x_true=x, y=[x], physics=SimpleNamespace(
        A=lambda v: [v * 2], A_adjoint=no_kernel))
    findings = gpu_check._apply_twice(problem)
    assert findings["A"] == "bitwise repeatable"
    assert findings["A_adjoint"].startswith("no deterministic kernel: grid_sampler_2d")


def test_gpu_check_in_process_checks_run_on_the_cpu(tmp_path, monkeypatch):
    from tests.support.walnut_fixture import walnut_cache

    monkeypatch.setenv("SCALEBENCH_CACHE", str(walnut_cache(tmp_path)))
    gpu_check = _tool("gpu_check")
    findings = gpu_check.operator_determinism(torch.device("cpu"), size=32)
    assert set(findings) == {"tomography_2d[torch]", "tomography_2d[astra]",
                             "tomography_2d[deepinv]", "multiframe_superres", "synthetic",
                             "radio_interferometry", "walnut_conebeam"}
    assert all(f == {"A": "bitwise repeatable", "A_adjoint": "bitwise repeatable"}
               for f in findings.values()), findings


def test_process_cost_names_each_process_by_what_it_runs():
    kind = _tool("test_process_cost").process_kind
    python = "/venv/bin/python"
    assert kind([python, "-m", "scalebench.launch.children", "publish", "--final", "f"]) == \
        "-m scalebench.launch.children publish"
    assert kind([python, "-m", "scalebench.benchopt_glue", "run", "/repo/bench"]) == \
        "-m scalebench.benchopt_glue run"
    assert kind([python, "-m", "scalebench.launch.rank_entry", "--folder", "d"]) == \
        "-m scalebench.launch.rank_entry"
    assert kind([python, "-u", "-c", "import sys;exec(eval(sys.stdin.readline()))"]) == \
        "pytest worker"
    assert kind([python, "-B", "-c", "import torch;  print(1)"]) == "-c import torch; print(1)"
    assert kind([python, "-m", "tools.evaluation_cost", "--sizes", "64"]) == \
        "-m tools.evaluation_cost"
    assert kind([python, "/repo/scripts/evaluation_cost.py", "--sizes", "64"]) == \
        "evaluation_cost.py"
    assert kind([python]) == "python"


def test_baselines_comparison_keeps_each_method_at_its_best_setting():
    """RED is tuned over its prior's step as red_lambda = c ||A||^2; the kept run is the one
    of the grid whose best PSNR is highest, as the separate runs give it."""
    from scalebench.problems import build_problem

    tool = _tool("baselines_comparison")
    grid = tool.settings("red", [0.01, 0.03], 200.0)
    assert grid == [{"denoiser_sigma": sigma, "red_lambda": c * 200.0}
                    for c in tool.RED_PRIOR_STEPS for sigma in (0.01, 0.03)]
    assert tool.settings("fista", [0.01, 0.03], 200.0) == [{"denoiser_sigma": 0.01},
                                                          {"denoiser_sigma": 0.03}]
    problem = build_problem("tomography_2d", image_size=16, num_angles=8, noise_level=0.05)
    solver = {"denoiser_sigma": 0.02, "device": "cpu"}
    sigmas = [0.001, 0.03, 0.3]
    chosen, values, bests = tool.tuned_run(problem, solver, "pgd", "tv", 3,
                                           tool.settings("pgd", sigmas, 1.0))
    separate = [max(tool.pnp_run(problem, {**solver, "denoiser_sigma": sigma}, "pgd", "tv",
                                 3, tool.psnr)) for sigma in sigmas]
    assert bests == separate and len(set(separate)) == 3
    assert chosen == separate.index(max(separate)) and max(values) == max(separate)


def test_an_example_gives_each_name_its_first_entry_and_each_parameter_its_first_value():
    datasets, solvers = measuring.example_settings("methods.yml")
    assert list(datasets) == ["tomography_2d", "multiframe_superres"]
    assert datasets["tomography_2d"] == {"image_size": 256, "num_angles": 60,
                                         "noise_level": 0.05}
    assert solvers["pnp"]["algorithm"] == "pgd" and solvers["pnp"]["denoiser"] == "tv"
    assert solvers["fbp"] == {"filter": "ram-lak", "device": "cpu"}


def test_a_pnp_config_evaluates_every_iteration():
    config = measuring.pnp_config({"synthetic": {"image_size": 32}}, {"denoiser": "tv"}, 4,
                                  "1h")
    assert config == {"objective": ["imaging_inverse_problem"],
                      "dataset": [{"synthetic": {"image_size": 32}}],
                      "solver": [{"pnp": {"denoiser": "tv", "max_iter": 4}}],
                      "max-runs": 5, "timeout": "1h"}


def test_cluster_faults_counts_the_experiments_each_allocation_started_and_lost():
    """Each start of a job (its template's first line) loses the experiments it started whose
    rows none of its own wrote; a complete result has each experiment's iterations and its
    initial estimate."""
    import pandas as pd

    tool = _tool("cluster_faults")
    log = "\n".join([
        "[scalebench] job 7: 1 task(s) on n1 (master n1), runtime none, config c.yml",
        "[scalebench] experiment 1/3 (a1): x", "[scalebench] experiment 2/3 (b2): x",
        "slurmstepd: error: *** JOB 7 CANCELLED AT 2026-12-07 DUE TO JOB REQUEUE ***",
        "[scalebench] job 7: 1 task(s) on n3 (master n3), runtime none, config c.yml",
        "[scalebench] experiment 1/2 (b2): x", "[scalebench] experiment 2/2 (c3): x"])
    rows = pd.DataFrame({"prov_slurm_restart_count": ["", "", "1", "1"],
                         "experiment_id": ["a1", "a1", "b2", "c3"]})
    assert tool.lost_per_allocation(log, rows) == [1, 0]
    assert tool.lost_per_allocation(log, None) == [2, 2]
    assert tool.expected_rows(tool.limit_config([5, 6])) == 13


def test_time_budget_check_runs_the_examples_pnp_with_the_denoiser_at_one_size():
    tool = _tool("time_budget_check")
    config = tool.budget_config("multiframe_superres.yml", "dncnn")
    (solver, params), = config["solver"][0].items()
    assert solver == "pnp" and params["denoiser"] == "dncnn" and params["pretrained"] == "auto"
    assert config["max-runs"] == params["max_iter"] + 1 and config["n-repetitions"] == 1
    sized = tool.at_size(config, 384, 200)
    assert sized["dataset"][0]["multiframe_superres"]["image_size"] == 384
    assert sized["timeout"] == "200s" and config["dataset"] != sized["dataset"]
