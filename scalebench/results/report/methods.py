"""Time to quality per method: each dataset's headline metric against solver time, and the
iterations and seconds each run needs to come within ``TARGET_TOLERANCE_DB`` of the best value
any run reached on that dataset.

A method is the solver with, where the rows hold them, its ``algorithm`` and ``denoiser``
parameters, or its ``filter`` or ``image`` (``METHOD_PARAMETERS``); rows written before a
solver had such a parameter simply lack the column. Seconds are benchopt's solver time
(``time``), which leaves the set-up out; the set-up is listed apart. Imports no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from scalebench.results.report.data import (
    RANDOM_MARK,
    RUN,
    Results,
    headline_metric,
    parameter_text,
    random_weight_experiments,
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
    number,
    skip,
    wrap,
)
from scalebench.results.report.over_images import (
    image_columns,
    image_series,
    images_of,
    images_text,
    over_images,
    several_images,
)
from scalebench.results.report.repetitions import draw_time_band, time_bands

# The solver parameters that, with the solver, name a method (absent columns are skipped):
# pnp's algorithm and denoiser, a filtered back-projection's filter, what CLEAN's rows score.
METHOD_PARAMETERS = ("p_solver_algorithm", "p_solver_denoiser", "p_solver_filter",
                     "p_solver_image")
# The common target: this many dB below the best value any run reached on the dataset.
TARGET_TOLERANCE_DB = 0.5
# Solvers whose estimate is no reconstruction of the dataset's measurements: the standalone
# denoiser denoises the noisy ground truth, so its quality would set a target no
# reconstruction is asked to meet.
NOT_RECONSTRUCTIONS = ("denoiser",)
NOT_REACHED = "not reached"
ALL_REPETITIONS = re.compile(r" rep \d+")  # a band's label: the series, not one repetition


def solver_of(name: object) -> str:
    """The solver of benchopt's solver name (its parameters in brackets dropped)."""
    return str(name).split("[")[0]


def reconstructions(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs that reconstruct the dataset's image (all but NOT_RECONSTRUCTIONS)."""
    return rows[~rows["solver_name"].map(solver_of).isin(NOT_RECONSTRUCTIONS)]


def method_names(rows: pd.DataFrame) -> pd.Series:
    """Per row, its method: the solver, then ``algorithm=...`` and ``denoiser=...`` where the
    rows hold those parameters."""
    names = rows["solver_name"].map(solver_of)
    for column in METHOD_PARAMETERS:
        if column in rows:
            values = rows[column].astype(str).where(rows[column].notna())
            names = names + (" " + column.removeprefix("p_solver_") + "=" + values).fillna("")
    return names


def dataset_labels(rows: pd.DataFrame, leave_out: tuple[str, ...] = ()) -> dict[str, str]:
    """Per benchopt dataset name: the dataset with the parameters that differ between the
    datasets of that name in ``rows`` (benchopt's name lists every parameter), but
    ``leave_out`` (the image, for a label over images)."""
    first = rows.groupby("dataset_name", sort=False).first()
    bases = first.index.map(solver_of)
    columns = [c for c in first.columns if c.startswith("p_dataset_") and c not in leave_out]
    labels = {}
    for name, base in zip(first.index, bases, strict=True):
        same = first[bases == base]
        differing = [f"{c.removeprefix('p_dataset_')}={parameter_text(first.loc[name, c])}"
                     for c in columns if same[c].astype(str).nunique(dropna=False) > 1]
        labels[name] = " ".join([base, *differing])
    return labels


def first_at_or_above(values, target: float) -> int | None:
    """The position of the first of ``values`` (in iteration order) at or above ``target``;
    None when none is (a missing value, a diverged estimate, never is)."""
    return next((i for i, value in enumerate(values) if value >= target), None)


@dataclass
class Target:
    value: float  # the target: the best value of any run minus the tolerance
    runs: pd.DataFrame  # per run: best, iterations and seconds to the target (NaN: not reached)


def time_to_target(rows: pd.DataFrame, metric: str,
                   tolerance: float = TARGET_TOLERANCE_DB) -> Target:
    """The common target of ``rows`` (the runs of one dataset: columns RUN, stop_val, time
    and ``metric``, higher better) and, per run, its best value and the iteration and solver
    time of its first row at or above the target. A missing value (a diverged estimate) is
    never best and never reaches."""
    measured = rows[rows[metric].notna()]
    target = float(measured[metric].max()) - tolerance
    table = {}
    for run, part in rows.groupby(RUN, sort=False):
        part = part.sort_values("stop_val")
        position = first_at_or_above(part[metric], target)
        first = part.iloc[position] if position is not None else None
        table[run] = {"best": part[metric].max(),
                      "iterations": first["stop_val"] if first is not None else float("nan"),
                      "seconds": first["time"] if first is not None else float("nan")}
    return Target(target, pd.DataFrame.from_dict(table, orient="index"))


def _reached(value: float, digits: int) -> str:
    """Iterations or seconds to the target: 'not reached' where the run never got there."""
    return NOT_REACHED if pd.isna(value) else number(value, digits)


def methods(results: Results) -> View:
    rows = results.rows
    if "time" not in rows:
        return skip("methods", "Time to quality per method", "needs benchopt's time column")
    rows = reconstructions(rows)
    datasets = []
    for dataset, part in rows.groupby("dataset_name", sort=False):
        metric, name = headline_metric(dataset)
        if metric in part and part[metric].notna().any() and part[RUN].nunique() > 1:
            datasets.append((dataset, part, metric, name))
    if not datasets:
        return skip("methods", "Time to quality per method", "no dataset with two or more "
                    "reconstruction runs measuring its headline metric")
    method, dataset_label = method_names(rows), dataset_labels(rows)
    colours = {m: f"C{i % 10}" for i, m in enumerate(dict.fromkeys(method))}
    random = random_weight_experiments(rows)
    shown = {run: wrap(results.labels[run] + (RANDOM_MARK if run in random else ""), 60)
             for run in dict.fromkeys(rows[RUN])}
    labels = list(shown.values())
    width = min(FIGURE_WIDTH, 4.5 * len(datasets))
    figure, axes = new_figure(width, 3.2 + legend_height(labels, width), 1, len(datasets))
    records, handles = {}, {}
    for axis, (dataset, part, metric, name) in zip(axes[0], datasets, strict=True):
        target = time_to_target(part, metric)
        bands = time_bands(part, metric)  # repetitions: their median and band, drawn once
        for run, curve in part.groupby(RUN, sort=False):
            curve = curve.sort_values("stop_val")
            style = {"color": colours[method[curve.index[0]]], "label": shown[run],
                     "markerfacecolor": "none" if run in random else None}
            if run not in bands:
                handles[shown[run]] = axis.plot(curve["time"], curve[metric], marker="o",
                                                markersize=3, **style)[0]
            elif bands[run] is not None:
                style["label"] = ALL_REPETITIONS.sub(" all repetitions", shown[run])
                handles[style["label"]] = draw_time_band(axis, bands[run], metric, **style)[0]
            found = target.runs.loc[run]
            if pd.notna(found["seconds"]):
                axis.plot([found["seconds"]], [curve.loc[curve["stop_val"] ==
                                                         found["iterations"], metric].iloc[0]],
                          marker="*", markersize=9, color=colours[method[curve.index[0]]])
            setup = curve["objective_setup_time_s"].iloc[0] \
                if "objective_setup_time_s" in curve else float("nan")
            found = {"dataset": dataset, "metric": name, "method": method[curve.index[0]],
                     "target": target.value, "setup": setup, **found}
            records[run] = found
        axis.axhline(target.value, color="grey", linestyle="--", linewidth=1)
        axis.set(xlabel="solver time (s, set-up excluded)", ylabel=name,
                 title=wrap(dataset_label[dataset], 40))
        axis.title.set_fontsize(SMALL_FONT + 2)
        axis.grid(alpha=0.3)
        axis.tick_params(labelsize=SMALL_FONT)
    legend_below(figure, axes[0][0], handles)  # every dataset's runs
    return View("methods", "Time to quality per method", figure, rows,
                f"one line per run (its repetitions as their median, with a band from the fastest "
                f"to the slowest), coloured by method (solver, algorithm, denoiser); dashed: "
                f"the dataset's target, {TARGET_TOLERANCE_DB:g} dB below the best value any run "
                f"reached; a star where a run first reaches it; the standalone denoiser, which "
                f"reconstructs nothing, is left out"
                + (f"; open markers{RANDOM_MARK}: a learned denoiser with random weights, its "
                   f"time to quality says nothing about the method" if random else "")
                + "; the table: a configuration run on several images as its figures over "
                  "them (each image its own target; a figure not reached is not measured; "
                  "scalebench report --per-image: one line per image)",
                _table(results, rows, pd.DataFrame.from_dict(records, orient="index"), random))


def _table(results: Results, rows: pd.DataFrame, found: pd.DataFrame, random: set) -> Table:
    """One line per run, or, where a configuration ran several images (and not
    ``--per-image``), one per configuration with its figures over the images."""
    images = images_of(rows).groupby(rows[RUN], sort=False).first()
    series = image_series(rows).groupby(rows[RUN], sort=False).first()
    if results.per_image or not several_images(series, images):
        labels = dataset_labels(rows)
        return Table(["dataset", "metric", "method", "run", "best (dB)", "target (dB)",
                      "iterations to target", "seconds to target (set-up excluded)",
                      "set-up (s)"],
                     [[labels[r["dataset"]], r["metric"], r["method"],
                       results.labels[run] + (RANDOM_MARK if run in random else ""),
                       number(r["best"], 4), number(r["target"], 4),
                       _reached(r["iterations"], 12), _reached(r["seconds"], 4),
                       number(r["setup"], 3)] for run, r in found.iterrows()])
    leave_out = image_columns(rows)
    labels, names = dataset_labels(rows, leave_out), run_labels(rows, leave_out)
    table = []
    for _, runs in found.groupby(series.loc[found.index], sort=False):
        first, over = runs.index[0], images.loc[runs.index]
        figures = {c: over_images(runs[c], over) for c in ("best", "iterations", "seconds",
                                                            "setup")}
        table.append([labels[runs["dataset"].iloc[0]], runs["metric"].iloc[0],
                      runs["method"].iloc[0],
                      names[first] + (RANDOM_MARK if first in random else ""),
                      str(over.nunique(dropna=False)), images_text(figures["best"], 4),
                      figures["iterations"].mean_text(3), figures["seconds"].mean_text(3),
                      figures["setup"].mean_text(3)])
    return Table(["dataset", "metric", "method", "configuration", "images",
                  "best (dB): mean ± std (lowest–highest)", "iterations to target: mean",
                  "seconds to target: mean (set-up excluded)", "set-up (s): mean"], table)
