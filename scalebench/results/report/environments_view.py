"""The environments view: per experiment run in two or more environments (threads, image,
commit, GPUs...), each step's time and the peak memory per environment side by side, the
headline metric against time overlaid, and a table of the fields that differ.

Repetitions are drawn as their median, with a bar or a band from the lowest to the highest
repetition. The figures per run are those of ``scalebench compare`` (``run_measures``), so the
page and the command agree. Imports no torch.
"""

from __future__ import annotations

import pandas as pd

from provenance.environment import (
    SHOWN_FIELDS,
    differing_fields,
    environment_key,
    environment_labels,
)
from provenance.schema import column
from scalebench.results.report.data import RUN, Results, experiment_key, headline_metric
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
from scalebench.results.report.measures import run_measures
from scalebench.results.report.repetitions import draw_ranges, draw_time_band, values_text

# Where the runs ran, shown per environment (provenance.environment.SHOWN_FIELDS: no part
# of it).
HOST_FIELDS = tuple(f for f in SHOWN_FIELDS if f in ("hostname", "slurm_job_id"))
TITLE = "Environments: the same experiment in each environment"


def _environments(first: pd.DataFrame) -> pd.Series:
    """Per run (``first``: each run's first row), its environment key."""
    return pd.Series([environment_key(r) for r in first.to_dict("records")], index=first.index)


def _series(results: Results) -> list[tuple[str, pd.DataFrame]]:
    """The experiments run in two or more environments, with their runs' first rows."""
    first = results.rows.groupby(RUN, sort=False).first()
    first["_environment"] = _environments(first)
    return [(key, group) for key, group in first.groupby(experiment_key(first), sort=False)
            if group["_environment"].nunique() > 1]


def _bars(axis, figures: pd.DataFrame, columns: list[str], environments: pd.Series,
          names: dict[str, str], xlabel: str) -> None:
    """Side-by-side horizontal bars: one group per measure, one bar per environment (median,
    with the lowest-to-highest repetition as an error bar)."""
    keys = list(dict.fromkeys(environments))
    height = 0.8 / len(keys)
    for index, key in enumerate(keys):
        bands = [figures[c].groupby(environments, sort=False).agg(
            ["median", "min", "max", "count"]).loc[key] for c in columns]
        positions = [row + index * height for row in range(len(columns))]
        axis.barh(positions, [band["median"] for band in bands], height=height,
                  color=f"C{index % 10}", label=names[key])
        draw_ranges(axis, positions, *([band[part] for band in bands]
                                       for part in ("median", "min", "max", "count")))
    axis.set_yticks([row + 0.4 - height / 2 for row in range(len(columns))],
                    [wrap(c, 24) for c in columns])
    axis.invert_yaxis()
    axis.set(xlabel=xlabel)
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(axis="x", alpha=0.3)


def _curves(axis, rows: pd.DataFrame, environments: pd.Series, names: dict[str, str],
            metric: str, label: str) -> None:
    """The headline metric per iteration against solver time: the median over repetitions,
    with a band from the fastest to the slowest repetition."""
    rows = rows.assign(_environment=rows[RUN].map(environments))
    for index, (key, part) in enumerate(rows.groupby("_environment", sort=False)):
        by_iteration = part.groupby("stop_val")
        band = by_iteration["time"].agg(["median", "min", "max"]).assign(
            **{metric: by_iteration[metric].median()})
        draw_time_band(axis, band, metric, color=f"C{index % 10}", label=names[key])
    axis.set(xlabel="solver time (s, set-up excluded)", ylabel=label)
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(alpha=0.3)


def _summary(results: Results, first: pd.DataFrame, figures: pd.DataFrame,
             names: dict[str, str], measures: list[str]) -> list[list[str]]:
    """Per environment: what differs (and where it ran), then each measure's median with the
    lowest and highest repetition."""
    keys = list(dict.fromkeys(first["_environment"]))
    records = [first[first["_environment"] == key].iloc[0].to_dict() for key in keys]
    differences = differing_fields(records)
    label = results.labels[first.index[0]].split(" rep ")[0]
    table = []
    for index, key in enumerate(keys):
        runs = first[first["_environment"] == key]
        hosts = sorted({str(v) for f in HOST_FIELDS if column(f) in runs
                        for v in runs[column(f)].dropna() if str(v)})
        measured = [values_text(figures.loc[runs.index, name], 4) for name in measures]
        table.append([label, names[key], "; ".join(f"{field}={values[index]}" for field, values
                                                   in differences.items()),
                      ", ".join(hosts), str(len(runs)), *measured])
    return table


def environments(results: Results) -> View:
    found = _series(results)
    if not found:
        return skip("environments", TITLE, "no experiment ran in two or more environments "
                    "(same config hash and world size; threads, image, commit... differing)")
    figure, axes = None, None
    summary, measures_seen, compared = [], [], []
    height = 3.2
    for index, (_, first) in enumerate(found):
        rows = results.rows[results.rows[RUN].isin(first.index)]
        compared.append(rows)
        measures, figures = run_measures(rows)
        names = _environment_names(first)
        if figure is None:
            all_names = [wrap(n, 60) for n in names.values()]
            figure, axes = new_figure(FIGURE_WIDTH, height * len(found)
                                      + legend_height(all_names, FIGURE_WIDTH), len(found), 3)
        times = [m.name for m in measures if m.kind == "time" and "s/iteration" in m.name
                 or m.name == "iteration (s)"]
        memory = [m.name for m in measures if m.kind == "memory"]
        _bars(axes[index][0], figures, times, first["_environment"], names, "seconds")
        if memory:
            _bars(axes[index][1], figures, memory, first["_environment"], names, "MiB")
        metric, label = headline_metric(rows["dataset_name"].iloc[0])
        if metric in rows and "time" in rows:
            _curves(axes[index][2], rows, first["_environment"], names, metric, label)
        axes[index][0].set_title(wrap(results.labels[first.index[0]].split(" rep ")[0], 50),
                                 fontsize=SMALL_FONT + 1)
        shown = [m.name for m in measures]
        measures_seen += [m for m in shown if m not in measures_seen]
        summary += [row[:5] + [row[5 + shown.index(m)] if m in shown else "-"
                               for m in measures_seen]
                    for row in _summary(results, first, figures, names, shown)]
    legend_below(figure, axes[0][0])
    width = 5 + len(measures_seen)
    summary = [row + ["-"] * (width - len(row)) for row in summary]
    return View("environments", TITLE, figure, pd.concat(compared),
                "runs of one experiment (config hash and world size) in different "
                "environments; bars and dots: the median over repetitions; error bars and "
                "bands: the lowest to the highest repetition; `scalebench compare` judges "
                "the differences",
                Table(["experiment", "environment", "differing fields", "host(s)",
                       "repetitions", *(f"{m}: median (lowest–highest)"
                                        for m in measures_seen)], summary))


def _environment_names(first: pd.DataFrame) -> dict[str, str]:
    """Per environment key of ``first``'s runs: the fields that differ, as a label."""
    keys = list(dict.fromkeys(first["_environment"]))
    records = [first[first["_environment"] == key].iloc[0].to_dict() for key in keys]
    return dict(zip(keys, environment_labels(records), strict=True))
