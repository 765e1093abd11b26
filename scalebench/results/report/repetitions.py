"""A run's repetitions, drawn and tabled as one: the rule of every view that plots time.

A series is a run without its repetition: one experiment (config hash, world size) in one
environment, across ``idx_rep``. Per time figure a series shows its median, with an error bar
or a band from the lowest to the highest repetition, and tables print "median (lowest–
highest)"; a series of fewer than ``MIN_REPETITIONS`` draws and prints its figure alone, with
no band, and so does one with a repetition missing the figure. The figures are
``scalebench.statistics``'s, as ``compare``'s are. Imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from scalebench.results.report.data import RUN
from scalebench.statistics import MIN_REPETITIONS, Summary, summary
from scalebench.statistics import range_text as figures_range_text

BAND_ALPHA = 0.2
ERROR_STYLE = {"ecolor": "black", "elinewidth": 0.8, "capsize": 2}


def series_of(runs: pd.Series) -> pd.Series:
    """Per run key, its series: the run without its repetition."""
    return runs.astype(str).str.replace(r"/rep[^/]*", "", regex=True)


def range_text(median, low, high, count: int, digits: int = 3) -> str:
    """A figure over ``count`` repetitions for a table (a ratio of two series' too):
    'median (lowest–highest)' from MIN_REPETITIONS on, else the figure alone ('-' when
    missing)."""
    if count < MIN_REPETITIONS:
        return figures_range_text(median, None, None, digits)
    return figures_range_text(median, low, high, digits)


def values_text(values: pd.Series, digits: int = 3) -> str:
    """The range text of one series' repetitions (``values``, one per repetition)."""
    return summary(values.tolist()).range_text(digits)


@dataclass(frozen=True)
class Repetitions:
    """Per series, indexed by its first run: the first run's row of the table, and per figure
    column its Summary over the repetitions; as frames, the median, and the lowest and highest
    repetition where the spread is known (NaN elsewhere: no bar), and the repetitions."""

    first: pd.DataFrame
    summaries: dict[tuple[str, str], Summary]  # (series, column)
    median: pd.DataFrame
    low: pd.DataFrame
    high: pd.DataFrame
    count: pd.Series

    def text(self, column: str, series: str, digits: int = 3) -> str:
        return self.summaries[series, column].range_text(digits)

    def repeated(self) -> bool:
        """Whether any series has MIN_REPETITIONS or more (else no bar and no band)."""
        return bool((self.count >= MIN_REPETITIONS).any())

    def errors(self, column: str, series: list[str] | None = None) -> list[list[float]]:
        """Error-bar lengths below and above the median reaching the lowest and the highest
        repetition, per series (of ``series``, default all; 0 where the spread is unknown)."""
        index = list(self.first.index) if series is None else list(series)
        median = self.median.loc[index, column]
        below = (median - self.low.loc[index, column]).clip(lower=0)
        above = (self.high.loc[index, column] - median).clip(lower=0)
        return [below.fillna(0.0).tolist(), above.fillna(0.0).tolist()]


def repetitions(table: pd.DataFrame, columns: list[str]) -> Repetitions:
    """The series of ``table`` (one row per run, indexed by run, as ``per_run`` gives it) in
    its order, with the Summary of each of ``columns`` over each series' repetitions."""
    runs = table.index.to_series()
    firsts = runs.groupby(series_of(runs), sort=False).transform("first")
    order = list(dict.fromkeys(firsts))
    summaries = {(first, column): summary(part[column].tolist())
                 for first, part in table.groupby(firsts, sort=False) for column in columns}

    def frame(statistic) -> pd.DataFrame:
        return pd.DataFrame([[statistic(summaries[first, column]) for column in columns]
                             for first in order], index=order, columns=columns, dtype=float)

    return Repetitions(table.loc[order], summaries, frame(lambda s: s.median),
                       frame(lambda s: None if s.spread is None else s.lowest),
                       frame(lambda s: None if s.spread is None else s.highest),
                       firsts.groupby(firsts, sort=False).size().loc[order])


def draw_ranges(axis, positions, centres, low, high, count) -> None:
    """Horizontal error bars at ``positions`` (the bars' rows) from ``low`` to ``high``,
    drawn for the series of MIN_REPETITIONS or more only (a single one has no range)."""
    centres, low, high = (pd.Series(list(v), dtype=float) for v in (centres, low, high))
    keep = (pd.Series(list(count)) >= MIN_REPETITIONS) & low.notna() & high.notna()
    if keep.any():
        axis.errorbar(centres[keep], pd.Series(list(positions))[keep],
                      xerr=[(centres - low).clip(lower=0)[keep],
                            (high - centres).clip(lower=0)[keep]], fmt="none", **ERROR_STYLE)


def draw_bars(axis, labels: list[str], spread: Repetitions, column: str, **style) -> None:
    """Horizontal bars of the medians, with an error bar from the lowest to the highest
    repetition where a series has several."""
    rows = range(len(labels))
    axis.barh(rows, spread.median[column], height=0.7, **style)
    axis.set_yticks(rows, labels)
    draw_ranges(axis, rows, spread.median[column], spread.low[column], spread.high[column],
                spread.count)


def draw_line(axis, x, median: pd.Series, low: pd.Series, high: pd.Series, repeated: bool,
              **style) -> list:
    """A line of medians and, where repetitions differ, a band from the lowest to the
    highest."""
    line = axis.plot(x, median, marker="o", **style)
    if repeated:
        axis.fill_between(x, low, high, alpha=BAND_ALPHA, linewidth=0,
                          color=line[0].get_color())
    return line


def time_bands(rows: pd.DataFrame, metric: str) -> dict[str, pd.DataFrame | None]:
    """Per run of a series of MIN_REPETITIONS or more: for the series' first run, per
    iteration the median, lowest and highest solver time and the median ``metric``; None for
    its other runs (drawn by the first). Runs of a single repetition are left out."""
    bands: dict[str, pd.DataFrame | None] = {}
    frame = rows.assign(_series=series_of(rows[RUN]))
    for _, part in frame.groupby("_series", sort=False):
        runs = list(dict.fromkeys(part[RUN]))
        if len(runs) < MIN_REPETITIONS:
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
