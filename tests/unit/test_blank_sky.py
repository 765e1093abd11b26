"""Whether radio runs beat a blank sky: a run's last SNR above 0 dB, the SNR of an all-zero
estimate; runs of other datasets are not judged."""

import pandas as pd
import torch

from scalebench.rank.metrics import quality_metrics
from scalebench.results.report.data import RUN, beats_blank_sky, blank_sky_line


def _rows(runs: dict[str, tuple[str, list[float]]]) -> pd.DataFrame:
    """Rows of runs: name -> (dataset name, SNR at iterations 0, 1, ...)."""
    return pd.DataFrame([{RUN: run, "dataset_name": dataset, "stop_val": k,
                          "objective_snr_db": snr}
                         for run, (dataset, curve) in runs.items()
                         for k, snr in enumerate(curve)])


def test_a_blank_sky_has_an_snr_of_zero_db():
    sky = torch.rand(1, 1, 16, 16)
    assert quality_metrics(torch.zeros_like(sky), sky, 1e4)["snr_db"] == 0.0


def test_radio_runs_are_judged_by_their_last_snr():
    rows = _rows({"a": ("radio_interferometry[image_size=64]", [0.0, -3.0, 2.5]),
                  "b": ("radio_interferometry[image_size=64]", [0.0, 4.0, -0.5]),
                  "c": ("tomography_2d[image_size=64]", [0.0, -9.0])})
    verdicts = beats_blank_sky(rows)
    assert verdicts.to_dict() == {"a": True, "b": False}
    assert blank_sky_line(rows) == ("radio interferometry: 1 of 2 run(s) beat a blank sky "
                                    "(final SNR > 0 dB); not: b")


def test_no_radio_run_no_line():
    rows = _rows({"c": ("tomography_2d", [0.0, 1.0])})
    assert beats_blank_sky(rows).empty and blank_sky_line(rows) == ""
