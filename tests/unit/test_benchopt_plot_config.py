"""benchopt's plot configuration of both benchmark folders (config.yml): benchopt draws the
measures plot alone, one figure per measure and dataset, and every saved view names a column
the measures plot draws from the rows; a view naming another column is reported here, not at
plot time."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
import yaml

from scalebench.benchopt_glue.plots import (
    INFERENCE_MEASURES,
    TRAINING_MEASURES,
    MeasureCurve,
    dataset_choices,
    measure_columns,
    measure_name,
    view_problems,
)
from scalebench.results.columns import column_pattern
from tests.support.paths import REPO

NAN = float("nan")
MEASURES = {"benchmark_inference": INFERENCE_MEASURES, "benchmark_training": TRAINING_MEASURES}
# benchopt's dataset names, as it writes them: two CT problems apart by their noise, a radio one
DATASETS = ("tomography_2d[image_size=32,noise_level=0.05]",
            "tomography_2d[image_size=32,noise_level=0.1]",
            "radio_interferometry[image_size=32,noise_level=0.05]")


def _config(folder: str) -> dict:
    return yaml.safe_load((REPO / folder / "config.yml").read_text())


def _rows_holding_every_measure(measures: tuple[str, ...]) -> pd.DataFrame:
    """Rows of every dataset with every candidate measure measured (the rank statistics
    included): what the measures plot can draw at most."""
    return pd.DataFrame([{"dataset_name": name, "objective_name": "o", "solver_name": "s",
                          "idx_rep": 0, "stop_val": 1, "time": 1.0,
                          **dict.fromkeys(measures, 1.0)} for name in DATASETS])


@pytest.mark.parametrize("folder", sorted(MEASURES))
def test_every_view_names_a_column_the_measures_plot_draws(folder):
    config = _config(folder)
    drawn = tuple(measure_columns(_rows_holding_every_measure(MEASURES[folder]),
                                  MEASURES[folder]))
    assert config["plots"] == [MeasureCurve.name]
    assert len(config["plot_configs"]) >= 3
    assert view_problems(config, drawn) == []
    # every measure is a documented results column (docs/results.md)
    assert [c for c in drawn if column_pattern(c) is None] == []


@pytest.mark.parametrize("folder", sorted(MEASURES))
def test_benchopt_accepts_the_views_of_the_configuration(folder):
    from benchopt.benchmark import Benchmark
    from benchopt.plotting import _check_view

    plots = Benchmark(REPO / folder).get_plots()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # benchopt warns about an unknown kind or option
        for name, view in _config(folder)["plot_configs"].items():
            _check_view(name, view, plots)


def test_a_view_naming_a_column_the_rows_do_not_have_is_reported():
    config = {"plots": ["measures", "objective_curve"], "plot_configs": {
        "typo": {"plot_kind": "measures", "measures_objective_column": "objective_psnr"},
        "rank 0": {"plot_kind": "measures",
                   "measures_objective_column": "objective_grad_time_s"},
        "other kind": {"plot_kind": "bar_chart",
                       "measures_objective_column": "objective_psnr_db"}}}
    drawn = tuple(measure_columns(_rows_holding_every_measure(INFERENCE_MEASURES),
                                  INFERENCE_MEASURES))
    problems = view_problems(config, drawn)
    assert problems[0] == "plots lists 'objective_curve': only 'measures' is drawn"
    assert problems[1].startswith("view 'typo': column 'objective_psnr' is no measure the "
                                  "rows hold; allowed: objective_psnr_db, objective_snr_db, "
                                  "objective_grad_time_s_max")
    # rows holding a rank statistic draw it, not rank 0's column
    assert problems[2].startswith("view 'rank 0': column 'objective_grad_time_s' is no measure")
    assert problems[3] == "view 'other kind': plot_kind 'bar_chart', allowed: 'measures'"
    assert len(problems) == 4


def test_measures_are_the_headline_quality_each_step_s_time_and_peak_memory():
    rows = pd.DataFrame({
        "dataset_name": [DATASETS[0]] * 2, "objective_psnr_db": [20.0, 25.0],
        "objective_snr_db": [5.0, 9.0], "objective_ssim": [0.5, 0.6],
        "objective_grad_time_s": [NAN, 0.1], "objective_grad_time_s_max": [NAN, 0.1],
        "objective_prox_time_s_max": [NAN, NAN],  # a step no run has
        "objective_denoise_peak_host_rss_mib": [NAN, 900.0],
        "objective_backproject_time_s": ["a", "b"]})  # not a number: never plotted
    # CT's headline is PSNR (its SNR repeats it); radio's is SNR
    assert measure_columns(rows, INFERENCE_MEASURES) == [
        "objective_psnr_db", "objective_grad_time_s_max", "objective_denoise_peak_host_rss_mib"]
    radio = rows.assign(dataset_name=DATASETS[2])
    assert measure_columns(radio, INFERENCE_MEASURES)[0] == "objective_snr_db"
    assert [measure_name(c) for c in measure_columns(rows, INFERENCE_MEASURES)] == [
        "PSNR (dB)", "grad step: time (s) (max over ranks)", "denoise step: peak host memory (MiB)"]


def test_dataset_choices_keep_benchopt_s_figure_names_whole():
    """benchopt saves a figure as Path(key).with_suffix('.pdf'): a dot in the dataset's label
    would cut the name there, and figures of one dataset would overwrite each other."""
    rows = pd.DataFrame({"dataset_name": list(DATASETS), "p_dataset_image_size": 32,
                         "p_dataset_noise_level": [0.05, 0.1, 0.05]})
    choices = dataset_choices(rows)
    assert choices == {"tomography_2d noise_level=0p05": DATASETS[0],
                       "tomography_2d noise_level=0p1": DATASETS[1],
                       "radio_interferometry": DATASETS[2]}
    assert not any("." in label or "/" in label for label in choices)
