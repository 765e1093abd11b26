"""The report's time-to-quality view on real rows: two pnp runs that differ in their denoiser
(TV and the bundled DnCNN), and the standalone denoiser, which the view leaves out."""

from __future__ import annotations

import html

import pandas as pd

from scalebench.results.report import write_report
from scalebench.results.report.data import load_results
from scalebench.results.report.figures import number
from scalebench.results.report.methods import NOT_REACHED, methods
from tests.support.cli import copy_benchmark, run_cli, tiny_experiment, write_experiment


def test_the_page_shows_each_method_s_best_value_and_time_to_the_common_target(tmp_path):
    pnp = {"max_iter": 3, "device": "cpu", "denoiser_sigma": 0.002}
    experiment = tiny_experiment(solver=[
        {"pnp": {**pnp, "denoiser": "tv"}},
        {"pnp": {**pnp, "denoiser": "dncnn", "pretrained": "bundled"}},
        {"denoiser": {"max_iter": 2, "device": "cpu"}}])
    done = run_cli("run", write_experiment(tmp_path, experiment), "--benchmark",
                   copy_benchmark(tmp_path), "--no-html", "--output", "methods",
                   "--outputs", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    path = tmp_path / "methods.parquet"
    rows = pd.read_parquet(path)
    pnp_rows = rows[rows["solver_name"].str.startswith("pnp")]
    assert sorted(pnp_rows["p_solver_denoiser"].unique()) == ["dncnn", "tv"]
    # The rule, written out on the rows: within 0.5 dB of the best PSNR of either pnp run.
    target = pnp_rows["objective_psnr_db"].max() - 0.5
    expected = {}
    for denoiser, run in pnp_rows.groupby("p_solver_denoiser"):
        run = run.sort_values("stop_val")
        reached = run[run["objective_psnr_db"] >= target]
        expected[f"pnp algorithm=pgd denoiser={denoiser}"] = [
            number(run["objective_psnr_db"].max(), 4), number(target, 4),
            number(reached["stop_val"].iloc[0], 12) if len(reached) else NOT_REACHED,
            number(reached["time"].iloc[0], 4) if len(reached) else NOT_REACHED,
            number(run["objective_setup_time_s"].iloc[0], 3)]
    assert any(value[2] != NOT_REACHED for value in expected.values())

    view = methods(load_results([path]))
    assert {row[2]: row[4:] for row in view.summary.rows} == expected
    assert len([line for line in view.figure.axes[0].get_lines()
                if not line.get_label().startswith("_")]) == 2  # the denoiser is left out

    page = tmp_path / "methods.html"
    write_report([path], page)
    text = page.read_text()
    assert "Time to quality per method</h2>" in text
    for method, values in expected.items():
        cells = "".join(f"<td>{html.escape(v)}</td>" for v in values)
        assert f"<td>{html.escape(method)}</td>" in text and cells in text
