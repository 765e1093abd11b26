"""The measurement tools' own logic, on the CPU: the GPU check's in-process checks."""

import importlib.util
from types import SimpleNamespace

import torch

from tests.support.paths import REPO


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    assert kind([python, "/repo/tools/evaluation_cost.py", "--sizes", "64"]) == \
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
