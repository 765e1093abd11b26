"""A real `scalebench run` of a config benchopt accepts: sparse evaluation (eval_every), a
diverging run that ends alone, per-step memory increases, the host-memory method, set-up
time and the progress display in iterations."""

import math
import os

import pandas as pd
import pytest
import yaml

from scalebench.rank.names import HOST_PEAK_SINCE_RESET
from tests.support.cli import copy_benchmark, run_cli

CONFIG = {  # no objective key and a solver name in another case, as benchopt allows
    "dataset": [{"tomography_2d": {"image_size": 32, "num_angles": 12, "num_operators": 2,
                                   "noise_level": 0.05}}],
    "solver": [
        {"PnP": {"max_iter": 5, "eval_every": 2, "device": "cpu", "denoiser_sigma": 0.002}},
        # A step 1e30 times too long: the estimate overflows within a few iterations.
        {"pnp": {"max_iter": 8, "device": "cpu", "step_size": 1e30, "init": "zeros"}},
        {"denoiser": {"max_iter": 2, "device": "cpu"}},
    ],
    "max-runs": 100,
    "timeout": 300,
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("figures")
    benchmark = copy_benchmark(root)
    config = root / "figures.yml"
    config.write_text(yaml.safe_dump(CONFIG))  # writes 1.0e+30, a float for YAML
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "figures", "--no-html")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    df = pd.read_parquet(benchmark / "outputs" / "figures.parquet")
    logs = {path.name: path.read_text()
            for path in (benchmark / "outputs" / "figures" / "logs").glob("*.log")}
    return df, logs


def _run(df, **params):
    rows = df
    for key, value in params.items():
        rows = rows[rows[f"p_solver_{key}"] == value]
    return rows.sort_values("stop_val")


def test_eval_every_records_every_kth_iteration_and_the_last(results):
    df, _ = results
    sparse = _run(df, eval_every=2, max_iter=5)
    assert sparse.stop_val.tolist() == [0, 2, 4, 5]
    assert sparse.solver_name.str.startswith("pnp").all()  # "PnP" ran as pnp


def test_a_diverging_run_ends_with_nan_metrics_without_stopping_the_grid(results):
    df, _ = results
    diverged = _run(df, max_iter=8)
    last = diverged.iloc[-1]
    assert last.objective_diverged and len(diverged) < 9
    for column in ("objective_psnr_db", "objective_ssim", "objective_mse",
                   "objective_snr_db", "objective_asinh_psnr_db", "objective_value"):
        assert math.isnan(last[column]), column
    assert not diverged.objective_diverged.iloc[:-1].any()
    assert df.solver_name.str.startswith("denoiser").any()  # the grid went on
    assert not df[df.solver_name.str.startswith("denoiser")].objective_diverged.any()


def test_rows_carry_step_increases_the_host_method_and_set_up_time(results):
    df, _ = results
    measured = df[df.stop_val > 0]
    for step in ("grad", "denoise"):
        rows = measured[measured.solver_name.str.startswith("pnp")]
        increase = rows[f"objective_{step}_host_rss_increase_mib"]
        peak = rows[f"objective_{step}_peak_host_rss_mib"]
        assert (increase >= 0).all() and (increase < peak).all()
        assert f"objective_{step}_host_rss_increase_mib_max" in df.columns
    assert set(df.objective_host_memory_method) == {HOST_PEAK_SINCE_RESET}
    assert (df.objective_setup_time_s > 0).all()


def test_rows_carry_the_cpu_share_of_each_step_for_every_rank(results):
    df, _ = results
    rows = df[(df.stop_val > 0) & df.solver_name.str.startswith("pnp")]
    cores = os.cpu_count()
    for step in ("grad", "denoise"):
        share = rows[f"objective_{step}_cpu_utilization"]
        assert ((share > 0) & (share <= cores + 0.5)).all(), share.tolist()
        assert (rows[f"objective_{step}_cpu_utilization_max"]
                >= rows[f"objective_{step}_cpu_utilization_mean"]).all()


def test_progress_is_shown_in_iterations_of_max_iter(results):
    _, logs = results
    text = "\n".join(logs.values())
    assert "iteration 5/5" in text and "iteration 2/2" in text
