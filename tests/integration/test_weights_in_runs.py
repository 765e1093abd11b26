"""Real runs record the denoiser weights that ran, and random weights warn once."""

from __future__ import annotations

import pandas as pd

from scalebench.data.manifest import load_manifest
from tests.support.cli import copy_benchmark, run_cli, tiny_experiment


def test_rows_record_the_weights_that_ran_and_random_ones_warn_once(tmp_path, write_config,
                                                                    empty_hub):
    benchmark = copy_benchmark(tmp_path)
    common = {"max_iter": 1, "device": "cpu", "denoiser_sigma": 0.05}
    experiment = tiny_experiment(solver=[
        {"denoiser": {**common, "denoiser": "dncnn", "pretrained": ["none", "auto"]}},
        {"denoiser": {**common, "denoiser": "tv"}},
    ])
    done = run_cli("run", write_config(experiment), "--benchmark", benchmark, "--output", "w",
                   "--no-html")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pd.read_parquet(benchmark / "outputs" / "w.parquet")
    ran = rows.groupby("p_solver_pretrained").first()
    tv = rows[rows.p_solver_denoiser == "tv"]
    dncnn = rows[rows.p_solver_denoiser == "dncnn"].set_index("p_solver_pretrained")
    assert set(dncnn.loc["auto", "prov_weights"]) == {"bundled"}
    assert set(dncnn.loc["auto", "prov_weights_sha256"]) == {
        load_manifest()["dncnn_gray_bundled"].checksum}
    assert set(dncnn.loc["none", "prov_weights"]) == {"random"}
    assert set(tv.prov_weights) == {"none"} and set(tv.prov_weights_sha256) == {""}
    assert len(ran) == 2
    logs = [p.read_text() for p in (benchmark / "outputs" / "w" / "logs").glob("*.log")]
    warnings = [log.count("runs with random weights") for log in logs]
    assert sorted(warnings) == [0, 0, 1], warnings
    check = run_cli("check", benchmark / "outputs" / "w.parquet")
    assert check.returncode == 0, check.stdout + check.stderr
