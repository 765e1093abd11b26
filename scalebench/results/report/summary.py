"""The one-line answers a results file gives first: per dataset, the best quality any
reconstruction reached, by which method and after how long; the radio runs against a blank
sky; the runs that stopped before their max_iter. ``scalebench run`` closes with them and the
report opens with them. Imports no torch."""

from __future__ import annotations

import pandas as pd

from provenance.stop_reasons import TIME_LIMIT, early_stop_line
from scalebench.results.report.data import (
    RUN,
    SOURCE,
    Results,
    blank_sky_line,
    headline_metric,
    run_labels,
)
from scalebench.results.report.figures import number
from scalebench.results.report.methods import dataset_labels, method_names, reconstructions
from scalebench.results.report.over_images import (
    image_columns,
    image_series,
    images_of,
    over_images,
    several_images,
)
from scalebench.results.stops import limit_advice, stops_by
from scalebench.results.store import EXPERIMENT_COLUMN


def best_quality_lines(rows: pd.DataFrame, per_image: bool = False) -> list[str]:
    """Per dataset with a reconstruction measuring its headline metric: 'best PSNR on
    <dataset>: 30.1 dB, by <method>, after 1.23 s of solver time (iteration 40)'; a dataset
    whose configurations ran several images (``per_image`` False): the best mean over them."""
    rows = reconstructions(rows)
    if rows.empty or "time" not in rows:
        return []
    methods, labels = method_names(rows), dataset_labels(rows)
    over = dataset_labels(rows, image_columns(rows))
    lines = []
    for label, group in rows.groupby(rows["dataset_name"].map(over), sort=False):
        column, metric = headline_metric(group["dataset_name"].iloc[0])
        if column not in group or group[column].isna().all():
            continue
        series, images = image_series(group), images_of(group)
        if not per_image and several_images(series, images):
            lines.append(_best_over_images(group, column, metric, label, methods))
            continue
        for dataset, part in group.groupby("dataset_name", sort=False):
            if part[column].isna().all():
                continue
            # the first row reaching the best value: how long it took to get there
            best = part[part[column] == part[column].max()].sort_values(["time", "stop_val"])
            row = best.iloc[0]
            lines.append(f"best {metric} on {labels[dataset]}: {number(row[column], 4)} dB, "
                         f"by {methods[best.index[0]]}, after {number(row['time'])} s of "
                         f"solver time (iteration {int(row['stop_val'])}, set-up excluded)")
    return lines


def _best_over_images(rows: pd.DataFrame, column: str, metric: str, label: str,
                      methods: pd.Series) -> str:
    """'best mean PSNR over 4 images on <dataset>: 30.1 ± 0.41 (29.6–30.5) dB, by <method>':
    the configuration of the highest mean over its images of each image's best value."""
    runs = rows.groupby(RUN, sort=False)
    best, images = runs[column].max(), images_of(rows).groupby(rows[RUN], sort=False).first()
    series = image_series(rows).groupby(rows[RUN], sort=False).first()
    figures = {key: over_images(best.loc[part.index], images.loc[part.index])
               for key, part in best.groupby(series, sort=False)}
    top = max((key for key in figures if figures[key].mean is not None),
              key=lambda key: figures[key].mean)
    first = series.index[series == top][0]
    return (f"best mean {metric} over {figures[top].count} images on {label}: "
            f"{figures[top].mean_text(4)} dB, by {methods[(rows[RUN] == first).idxmax()]}")


def stopped_early_line(results: Results) -> str:
    """The runs that ended before their max_iter, by reason ('stopped early: 1 experiment cut
    by its time limit: <run> at iteration 1 of 4 (timeout 10 s: 38 s would do, from plan's
    prediction ...)'); "" when none did."""
    rows = results.rows
    if rows.empty:
        return ""
    stops = stops_by(rows, RUN)
    return early_stop_line(stops, run_labels(rows), {
        run: limit_advice(part, stops[run], _recorded_limit(results, part))
        for run, part in rows.groupby(RUN, sort=False) if stops[run].reason == TIME_LIMIT})


def _recorded_limit(results: Results, run: pd.DataFrame) -> dict | None:
    """The time limits entry the launch recorded for ``run``'s experiment in its file's run
    status (None: none recorded, or a file without experiment ids)."""
    if EXPERIMENT_COLUMN not in run:
        return None
    limits = {file["path"]: file.get("time_limits") or {} for file in results.files}
    return limits.get(run[SOURCE].iloc[0], {}).get(str(run[EXPERIMENT_COLUMN].iloc[0]))


def tuned_lines(files: list[dict]) -> list[str]:
    """Per tuned method of the files' configs: 'pnp[...] at the setting scalebench tune chose
    on validation images a, b (study S, trial k of N trials); scored here on others'."""
    lines = []
    for file in files:
        for study, record in (file.get("tuned") or {}).items():
            setting = ", ".join(f"{k}={number(v)}" for k, v in record["setting"].items())
            lines.append(f"{record['method']} runs {setting}, the setting scalebench tune "
                         f"chose on validation images {', '.join(record['validation'])} "
                         f"(study {study}, trial {record['trial']} of {record['trials']}), "
                         f"not on the images scored here")
    return lines


def closing_lines(results: Results) -> str:
    """The lines ``scalebench run`` ends with, newline-separated ("" when there is none); a
    configuration run on several images as its mean over them."""
    rows = results.rows
    return "\n".join(filter(None, [*best_quality_lines(rows), blank_sky_line(rows),
                                    stopped_early_line(results), *tuned_lines(results.files)]))
