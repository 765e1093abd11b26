"""The view "methods at their tuned best" on written rows: the best complete trial is the
tuned setting, the test run's runs at that setting give its test quality over the images and
those at another setting the untuned one, pruned trials count in the cost and the share."""

from __future__ import annotations

import statistics

import pandas as pd
import pytest

from provenance.canonical import canonical_json, config_hash
from scalebench.results.report.data import load_results
from scalebench.results.report.tuned import tuned_best


def _run(image: str, sigma: float, psnr: list[float], **tune) -> list[dict]:
    dataset = {"image_size": 32, "image": image}
    config = canonical_json({"dataset": {"name": "tomography_2d", "params": dataset},
                             "solver": {"name": "pnp", "params": {"denoiser_sigma": sigma}}})
    return [{"solver_name": f"pnp[algorithm=pgd,denoiser=tv,denoiser_sigma={sigma}]",
             "p_solver_algorithm": "pgd", "p_solver_denoiser": "tv",
             "p_solver_denoiser_sigma": sigma, "p_solver_seed": 0,
             "dataset_name": f"tomography_2d[image_size=32,image={image}]",
             "p_dataset_image": image, "objective_name": "imaging", "stop_val": k,
             "idx_rep": 0, "time": 0.1 * k, "objective_psnr_db": value,
             "prov_config_json": config, "prov_config_hash": config_hash(config),
             "prov_world_size": 1, **tune} for k, value in enumerate(psnr)]


def _trial(number: int, sigma: float, psnr: list[float], state: str) -> list[dict]:
    tune = {"tune_study": "pgd-1", "tune_trial": number, "tune_state": state,
            "tune_cpu_s": 10.0 + number}
    return _run("phantom-101", sigma, psnr, **tune) + _run("phantom-102", sigma,
                                                            [v + 1 for v in psnr], **tune)


def _results(tmp_path, *frames: list[dict]):
    paths = []
    for index, rows in enumerate(frames):
        paths.append(tmp_path / f"{index}.parquet")
        pd.DataFrame(rows).to_parquet(paths[-1])
    return load_results(paths)


TRIALS = [*_trial(0, 0.01, [10, 20, 25], "complete"), *_trial(1, 0.001, [10, 22, 24],
                                                              "complete"),
          *_trial(2, 0.3, [10, 12], "pruned")]
TEST = [*_run("shepp_logan", 0.01, [10, 28]), *_run("phantom-1", 0.01, [10, 26]),
        *_run("phantom-2", 0.01, [10, 30]), *_run("shepp_logan", 0.05, [10, 20]),
        *_run("phantom-1", 0.05, [10, 21])]


def test_the_tuned_setting_is_scored_over_the_test_images_beside_the_untuned(tmp_path):
    view = tuned_best(_results(tmp_path, TRIALS, TEST))
    (row,) = view.summary.rows
    cell = dict(zip(view.summary.header, row, strict=True))
    assert cell["tuned setting"] == "denoiser_sigma=0.01"  # validation mean 25.5 beats 24.5
    assert cell["validation (tuned)"] == "25.5"
    assert cell["test (tuned)"] == f"28 ± {statistics.stdev([28, 26, 30]):.2g} (26–30), " \
                                   f"3 images"
    assert cell["test (untuned)"] == "denoiser_sigma=0.05: 20.5 ± 0.71 (20–21), 2 images"
    assert cell["trials"] == "3 (2 complete, 1 pruned, 0 failed)"
    assert float(cell["CPU seconds"]) == pytest.approx(10 + 11 + 12)
    assert cell["pruned"] == "33%" and cell["validation images"] == "phantom-101, phantom-102"
    assert view.figure is not None


def test_without_a_test_run_it_says_not_run_and_without_a_tuning_it_is_not_shown(tmp_path):
    view = tuned_best(_results(tmp_path, TRIALS))
    (row,) = view.summary.rows
    assert row[2] == row[3] == "not run" and "no test run given" in view.note
    skipped = tuned_best(_results(tmp_path, TEST))
    assert skipped.figure is None and "needs a tuning's results file" in skipped.note
