"""Repetitions drawn as one: where a run's series (its experiment in one environment) holds
two or more repetitions, views that plot time draw their median with a band from the fastest
to the slowest repetition, once, instead of a line per repetition. Imports no torch."""

from __future__ import annotations

import pandas as pd

from scalebench.results.report.data import RUN

BAND_ALPHA = 0.2


def series_of(runs: pd.Series) -> pd.Series:
    """Per run key, its series: the run without its repetition."""
    return runs.astype(str).str.replace(r"/rep[^/]*", "", regex=True)


def time_bands(rows: pd.DataFrame, metric: str) -> dict[str, pd.DataFrame | None]:
    """Per run of a series of two or more repetitions: for the series' first run, per
    iteration the median, lowest and highest solver time and the median ``metric``; None for
    its other runs (drawn by the first). Runs of a single repetition are left out."""
    bands: dict[str, pd.DataFrame | None] = {}
    frame = rows.assign(_series=series_of(rows[RUN]))
    for _, part in frame.groupby("_series", sort=False):
        runs = list(dict.fromkeys(part[RUN]))
        if len(runs) < 2:
            continue
        by_iteration = part.groupby("stop_val")
        band = by_iteration["time"].agg(["median", "min", "max"])
        band[metric] = by_iteration[metric].median()
        bands[runs[0]] = band
        bands.update(dict.fromkeys(runs[1:]))
    return bands


def draw_time_band(axis, band: pd.DataFrame, metric: str, **style) -> list:
    """The median line and the lowest-to-highest band of ``band`` (``time_bands``)."""
    line = axis.plot(band["median"], band[metric], marker="o", markersize=3, **style)
    axis.fill_betweenx(band[metric], band["min"], band["max"], alpha=BAND_ALPHA, linewidth=0,
                       color=line[0].get_color())
    return line
