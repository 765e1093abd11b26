"""The measurement tools' own logic, on the CPU: the GPU check's in-process checks and the
evaluation-cost table (the figures themselves are measurements, printed, not asserted)."""

import importlib.util
import subprocess
import sys
from types import SimpleNamespace

import torch

from tests.conftest import REPO


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
    from tests.walnut_fixture import walnut_cache

    monkeypatch.setenv("SCALEBENCH_CACHE", str(walnut_cache(tmp_path)))
    gpu_check = _tool("gpu_check")
    findings = gpu_check.operator_determinism(torch.device("cpu"), size=32)
    assert set(findings) == {"tomography_2d[torch]", "tomography_2d[astra]",
                             "tomography_2d[deepinv]", "multiframe_superres", "synthetic",
                             "radio_interferometry", "walnut_conebeam"}
    assert all(f == {"A": "bitwise repeatable", "A_adjoint": "bitwise repeatable"}
               for f in findings.values()), findings


def test_evaluation_cost_prints_a_row_per_size_and_where_it_stopped():
    done = subprocess.run([sys.executable, str(REPO / "tools" / "evaluation_cost.py"),
                           "--sizes", "64,65536", "--repeats", "1", "--device", "cpu"],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    row = next(line.split() for line in lines if line.split()[:1] == ["64"])
    assert len(row) == 7 and float(row[3]) > 0 and float(row[2]) > 0  # iteration, evaluation
    assert any(line.startswith(" 65536 skipped: needs about") for line in lines)
