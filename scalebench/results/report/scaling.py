"""The scaling views: strong scaling (speedup and parallel efficiency of one configuration on
several world sizes) and weak scaling (efficiency at constant work per rank).

A point is a series (report.repetitions): one experiment in one environment, its repetitions
as their median time per iteration, with a band from the lowest to the highest repetition.
Speedup and efficiency are ratios of medians; their bands divide the base median by the
highest and the lowest repetition. Imports no torch.
"""

from __future__ import annotations

import pandas as pd

from scalebench.benchmarks import registered_problems, registered_solvers
from scalebench.results.report.data import (
    RUN,
    Results,
    configuration_columns,
    parameter_text,
    per_run,
    run_labels,
)
from scalebench.results.report.figures import (
    FIGURE_WIDTH,
    SMALL_FONT,
    Table,
    View,
    legend_below,
    legend_height,
    new_figure,
    skip,
    wrap,
)
from scalebench.results.report.order import WORLD
from scalebench.results.report.repetitions import draw_line, range_text, repetitions, series_of
from scalebench.statistics import MIN_REPETITIONS

TIME = "time_per_iteration_s"
BAND_NOTE = ("a point is the median over a run's repetitions, the band the lowest to the "
             "highest repetition")


def work_parameters() -> dict[str, int]:
    """Parameter columns whose growth is more work, and the power the work grows with, as the
    problems' and solvers' specs give them (counts of views, frames, time steps, channels or
    patches: 1; image and patch sides: 2), counts first. Seeds and noise levels are not work."""
    columns = {f"p_dataset_{name}": power for spec in registered_problems().values()
               for name, power in spec.work_parameters.items()}
    columns = dict(sorted(columns.items(), key=lambda item: item[1]))
    return {**columns, **{f"p_solver_{name}": power for spec in registered_solvers().values()
                          for name, power in spec.work_parameters.items()}}


WORK_PARAMETERS = work_parameters()


def configurations(table: pd.DataFrame, leave_out: tuple[str, ...], rows: pd.DataFrame):
    """Runs (or series) grouped by configuration without resources and ``leave_out``."""
    keys = [c for c in configuration_columns(rows, leave_out) if c in table]
    if not keys:
        return [("", table)]
    return list(table.groupby(keys, dropna=False, sort=False))


def timed_series(results: Results) -> pd.DataFrame:
    """Per series with a time per iteration, its first run's row with the median, lowest and
    highest repetition (``median``, ``low``, ``high``, ``count``)."""
    spread = repetitions(per_run(results.rows), [TIME])
    table = spread.first.assign(median=spread.median[TIME], low=spread.low[TIME],
                                high=spread.high[TIME], count=spread.count)
    return table.dropna(subset=["median"])


def curve(series: pd.DataFrame) -> pd.DataFrame:
    """Per world size of one curve's series: median, low, high and count (where two series
    share a world size, as two environments do, the faster median; the page warns above a
    plot whose runs differ in environment)."""
    return series.sort_values("median").drop_duplicates(WORLD).set_index(WORLD)[
        ["median", "low", "high", "count"]].sort_index()


def relative(points: pd.DataFrame, scale: pd.Series | float = 1.0) -> pd.DataFrame:
    """The base (fewest ranks) median over each point's median, lowest and highest
    repetition, times ``scale``: median, low (from the slowest) and high (from the fastest)."""
    base = points["median"].iloc[0]
    return pd.DataFrame({"median": base / points["median"] * scale,
                         "low": base / points["high"] * scale,
                         "high": base / points["low"] * scale, "count": points["count"]})


def text(points: pd.DataFrame, ranks) -> str:
    row = points.loc[ranks]
    return range_text(row["median"], row["low"], row["high"], int(row["count"]))


def _curves(table: pd.DataFrame, leave_out: tuple[str, ...], rows: pd.DataFrame):
    """(series, points) per configuration measured on two or more world sizes."""
    found = [(series, curve(series)) for _, series in configurations(table, leave_out, rows)]
    return [(series, points) for series, points in found if len(points) >= 2]


def _draw(axis, points: pd.DataFrame, **style) -> None:
    draw_line(axis, points.index, points["median"], points["low"], points["high"],
              bool((points["count"] >= MIN_REPETITIONS).any()), **style)


def _compared(results: Results, series: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of every repetition of ``series`` (first runs)."""
    wanted = set(series_of(pd.concat(series).index.to_series()))
    return results.rows[series_of(results.rows[RUN]).isin(wanted)]


def strong_scaling(results: Results) -> View:
    table = per_run(results.rows)
    if WORLD not in table or table[TIME].isna().all():
        return skip("strong_scaling", "Strong scaling", "needs prov_world_size and timed "
                     "iterations")
    curves = _curves(timed_series(results), (), results.rows)
    if not curves:
        return skip("strong_scaling", "Strong scaling", "no configuration was measured on "
                     "two or more world sizes")
    names = run_labels(results.rows, (WORLD, "idx_rep"))
    labels = [wrap(names[series.index[0]], 60) for series, _ in curves] + ["ideal"]
    figure, axes = new_figure(FIGURE_WIDTH, 3.6 + legend_height(labels, FIGURE_WIDTH), 1, 2)
    speed, efficiency = axes[0]
    summary = []
    for (series, points), label in zip(curves, labels, strict=False):
        speedup = relative(points)
        ratio = relative(points, points.index[0] / points.index.to_series())
        _draw(speed, speedup, label=label)
        _draw(efficiency, ratio, label=label)
        summary += [[names[series.index[0]], parameter_text(ranks), text(points, ranks),
                     text(speedup, ranks), text(ratio, ranks)] for ranks in points.index]
    top = max(points.index.max() for _, points in curves)
    low = min(points.index.min() for _, points in curves)
    speed.plot([low, top], [1, top / low], color="grey", linestyle=":", label="ideal")
    bases = {points.index[0] for _, points in curves}  # each curve's own fewest ranks
    speed.set(xlabel="ranks (measured world size)",
              ylabel=f"speedup vs {low} rank(s)" if len(bases) == 1
              else "speedup vs each configuration's fewest ranks")
    fastest = max(relative(points)["high"].max() for _, points in curves)
    speed.set_ylim(0, max(top / low, fastest) * 1.1)
    efficiency.set(xlabel="ranks (measured world size)", ylabel="parallel efficiency",
                   ylim=(0, max(1.15, max(relative(p, p.index[0] / p.index.to_series())[
                       "high"].max() for _, p in curves) * 1.05)))
    for axis in (speed, efficiency):
        axis.grid(alpha=0.3)
        axis.tick_params(labelsize=SMALL_FONT)
        axis.set_xticks(sorted({r for _, points in curves for r in points.index}))
    legend_below(figure, speed)
    return View("strong_scaling", "Strong scaling: speedup and parallel efficiency", figure,
                _compared(results, [series for series, _ in curves]),
                "time per iteration of the same configuration on each world size; speedup "
                "and efficiency (speedup x base ranks / ranks) from the medians; "
                + BAND_NOTE, Table(["configuration", "ranks", "time per iteration (s)",
                                    "speedup", "efficiency"], summary))


def _weak_series(table: pd.DataFrame, rows: pd.DataFrame) -> list:
    """(label, series, points) per series of constant work per rank on two or more world
    sizes."""
    found = []
    for size in [c for c in WORK_PARAMETERS if c in table and table[c].nunique() > 1]:
        groups = configurations(table, (size,), rows)
        names = run_labels(rows, (size, WORLD, "idx_rep"))
        for _, group in groups:
            work = group[size].astype(float) ** WORK_PARAMETERS[size] / group[WORLD]
            for per_rank, series in group.groupby(work):
                points = curve(series)
                if len(points) < 2:
                    continue
                label = f"{size.removeprefix('p_dataset_')}/rank = {per_rank:g}"
                if len(groups) > 1:  # the legend names what differs
                    label = f"{names[series.index[0]]}: {label}"
                found.append((label, series, points))
    return found


def weak_scaling(results: Results) -> View:
    table = per_run(results.rows)
    if WORLD not in table or table[TIME].isna().all():
        return skip("weak_scaling", "Weak scaling", "needs prov_world_size and timed "
                     "iterations")
    found = _weak_series(timed_series(results), results.rows)
    if not found:
        return skip("weak_scaling", "Weak scaling", "no series with the same work per rank "
                     "(views, frames, batch or pixels / world size) on two or more world "
                     "sizes")
    labels = [wrap(label, 60) for label, _, _ in found]
    figure, axes = new_figure(8, 3.6 + legend_height(labels, 8))
    axis = axes[0][0]
    summary = []
    for (label, _, points), shown in zip(found, labels, strict=True):
        ratio = relative(points)
        _draw(axis, ratio, label=shown)
        summary += [[label, parameter_text(ranks), text(points, ranks), text(ratio, ranks)]
                    for ranks in points.index]
    top = max(relative(points)["high"].max() for _, _, points in found)
    axis.set(xlabel="ranks (measured world size)", ylabel="weak-scaling efficiency",
             ylim=(0, max(1.15, top * 1.05)))
    axis.set_xticks(sorted({r for _, _, points in found for r in points.index}))
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(alpha=0.3)
    legend_below(figure, axis)
    return View("weak_scaling", "Weak scaling efficiency", figure,
                _compared(results, [series for _, series, _ in found]),
                "efficiency = median time per iteration on the fewest ranks / median time on "
                "N ranks, at constant work per rank (a count, or a side squared, over the "
                "ranks); " + BAND_NOTE,
                Table(["series", "ranks", "time per iteration (s)", "efficiency"], summary))
