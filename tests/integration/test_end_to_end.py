"""Whole runs through benchopt, as users launch them: `scalebench run` and `benchopt run`."""

import math
import subprocess
import sys

import pandas as pd
import pytest

from provenance.stop_reasons import COMPLETE, record_stops
from scalebench.results.store import run_status
from tests.support.cli import copy_benchmark, run_cli, tiny_experiment

STEP_COLUMNS = ["objective_grad_time_s", "objective_grad_peak_host_rss_mib",
                "objective_denoise_time_s", "objective_denoise_peak_host_rss_mib"]


QUALITY_COLUMNS = ["objective_psnr_db", "objective_ssim", "objective_mse",
                   "objective_snr_db", "objective_asinh_psnr_db", "objective_value"]


@pytest.fixture
def benchmark(tmp_path):
    """A private copy of the benchmark folder, so that outputs stay inside the test."""
    return copy_benchmark(tmp_path)


def _outputs(benchmark):
    folder = benchmark / "outputs"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_scalebench_run_writes_every_iteration_with_metrics_and_step_costs(benchmark,
                                                                          write_config):
    experiment = tiny_experiment()
    experiment["solver"][1]["denoiser"]["profiler"] = "torch"
    result = run_cli("run", write_config(experiment), "--benchmark", benchmark,
                     "--output", "tiny")
    assert result.returncode == 0, result.stderr[-2000:]
    parquet = benchmark / "outputs" / "tiny.parquet"
    assert f"Results: {parquet}" in result.stdout
    # the last experiment's publish completed the run
    record = run_status(parquet)
    assert record["status"] == "complete" and record["failures"] == []
    assert len(record["experiments"]) == 2
    # both ran to their max_iter: complete, on their rows and in the run status
    assert {(s.reason, s.iteration) for s in record_stops(record).values()} == \
        {(COMPLETE, 3), (COMPLETE, 2)}
    df = pd.read_parquet(parquet)
    assert set(df.objective_stop_reason) == {COMPLETE}
    pnp = df[df.solver_name.str.startswith("pnp")].sort_values("stop_val")
    denoiser = df[df.solver_name.str.startswith("denoiser")].sort_values("stop_val")
    assert pnp.stop_val.tolist() == [0, 1, 2, 3]
    assert denoiser.stop_val.tolist() == [0, 1, 2]
    for column in QUALITY_COLUMNS:
        assert df[column].map(math.isfinite).all(), column
    # iteration 0 is the initial estimate: no step measured yet; every later row is measured
    measured = pnp[pnp.stop_val > 0]
    assert pnp[pnp.stop_val == 0][STEP_COLUMNS].isna().all(axis=None)
    assert (measured[STEP_COLUMNS] > 0).all(axis=None)
    assert denoiser[denoiser.stop_val > 0]["objective_denoise_time_s"].gt(0).all()
    assert denoiser["objective_grad_time_s"].isna().all()  # the denoiser solver has no grad
    # benchopt's clock covers the measured steps of the iterations so far
    step_total = (measured.objective_grad_time_s + measured.objective_denoise_time_s).cumsum()
    assert (measured.time.to_numpy() >= step_total.to_numpy()).all()
    assert set(df.p_solver_profiler) == {"light", "torch"}
    traces = list((benchmark / "outputs" / "tiny" / "traces").glob("*/rep_0/torch_trace.json"))
    assert len(traces) == 1 and '"denoise"' in traces[0].read_text()
    traced = df[df.p_solver_profiler == "torch"].prov_config_hash.iloc[0]
    assert traces[0].parent.parent.name == traced[:16]
    report = benchmark / "outputs" / "tiny.html"
    assert report.is_file() and f"Report: {report}" in result.stdout
    assert not [name for name in _outputs(benchmark) if name.startswith(".partial")]


def test_bad_config_exits_2_in_one_line_and_keeps_earlier_results(benchmark, write_config):
    (benchmark / "outputs").mkdir()
    earlier = benchmark / "outputs" / "earlier.parquet"
    earlier.write_bytes(b"previous results")
    before = _outputs(benchmark)
    bad = tiny_experiment(solver=[{"pnp": {"max_iter": "ten"}}])
    result = run_cli("run", write_config(bad), "--benchmark", benchmark)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("scalebench: error: solver 'pnp': parameter 'max_iter'")
    assert _outputs(benchmark) == before and earlier.read_bytes() == b"previous results"
    taken = run_cli("run", write_config(tiny_experiment()), "--benchmark", benchmark,
                    "--output", "earlier")
    assert taken.returncode == 2 and "already exists" in taken.stderr
    assert earlier.read_bytes() == b"previous results"


def test_failure_during_the_run_leaves_no_result_file(benchmark, write_config, tmp_path):
    corrupt = tmp_path / "corrupt.pth"
    corrupt.write_bytes(b"not a torch file")
    experiment = tiny_experiment(solver=[{"pnp": {"max_iter": 2, "denoiser": "dncnn",
                                                  "pretrained": str(corrupt)}}])
    result = run_cli("run", write_config(experiment), "--benchmark", benchmark,
                     "--output", "broken")
    assert result.returncode == 1
    assert f"cannot load weights {corrupt}" in result.stderr
    assert "no result file was written" in result.stderr
    assert not [name for name in _outputs(benchmark) if name.endswith(".parquet")]


def test_plain_benchopt_run_of_the_benchmark_folder(benchmark, write_config):
    config = write_config(tiny_experiment(solver=[{"pnp": {"max_iter": 2}}]))
    result = subprocess.run(
        [sys.executable, "-m", "benchopt", "run", str(benchmark), "--config", str(config),
         "--no-plot", "--no-display", "--output", "plain"],
        capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    df = pd.read_parquet(benchmark / "outputs" / "plain.parquet")
    assert df.stop_val.tolist() == [0, 1, 2]
    assert df.objective_psnr_db.iloc[-1] > df.objective_psnr_db.iloc[0]


def test_plain_benchopt_run_rejects_a_wrong_parameter_type(benchmark, write_config):
    bad = tiny_experiment(dataset=[{"tomography_2d": {"image_size": "32x"}}])
    result = subprocess.run(
        [sys.executable, "-m", "benchopt", "run", str(benchmark), "--config",
         str(write_config(bad)), "--no-plot", "--no-display", "--output", "bad"],
        capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode != 0
    assert "parameter 'image_size' must be an integer >= 16, got '32x'" in result.stderr
    assert not (benchmark / "outputs" / "bad.parquet").exists()


def test_validate_command(write_config):
    good = run_cli("validate", write_config(tiny_experiment()))
    assert good.returncode == 0
    assert "valid (2 experiment(s); ranks per experiment: 1)" in good.stdout
    bad = run_cli("validate", write_config(tiny_experiment(dataset=["nope"])))
    assert bad.returncode == 2 and "unknown dataset 'nope'" in bad.stderr


def test_bad_command_line_arguments_exit_non_zero():
    result = run_cli("run")
    assert result.returncode == 2 and "config" in result.stderr
    result = run_cli("run", "configs/default.yml", "--output", "a/b")
    assert result.returncode == 2 and "--output must be a plain file name" in result.stderr
