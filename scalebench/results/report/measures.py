"""The figures a run's repetition gives each measure: per step seconds per iteration, the
iteration, peak host and device memory, training throughput, the best and final headline metric
and the seconds to the common quality target of the runs compared. ``scalebench compare`` and
the report's environments view both read them here; the target is common to the runs of one
image. Imports no torch.
"""

from __future__ import annotations

import pandas as pd

from scalebench.rank.names import INFERENCE_STEPS, TRAINING_STEPS
from scalebench.results.compare_rules import DB, HIGHER, LOWER, Measure
from scalebench.results.report.data import RUN, headline_metric, measured, per_run, step_peaks
from scalebench.results.report.methods import time_to_target
from scalebench.results.report.over_images import images_of

STEPS = (*INFERENCE_STEPS, *TRAINING_STEPS, "step")  # "step": a whole training step
PEAKS = {"peak host memory (MiB)": "host_rss", "peak device memory (MiB)": "cuda_alloc"}


def run_measures(rows: pd.DataFrame) -> tuple[list[Measure], pd.DataFrame]:
    """The measures of the runs of one experiment (``rows``: one or more environments; the
    quality target is common to all of them) and one figure per run and measure."""
    table, measures, values = per_run(rows), [], {}

    def add(measure: Measure, series: pd.Series | None) -> None:
        if series is not None and series.notna().any():
            measures.append(measure)
            values[measure.name] = series

    for step in STEPS:
        name = measured(table, f"objective_{step}_time_s")
        add(Measure(f"{step} (s/iteration)", "time", LOWER), table[name] if name else None)
    add(Measure("iteration (s)", "time", LOWER), table["time_per_iteration_s"])
    peaks = step_peaks(table, STEPS)
    for name, kind in PEAKS.items():
        add(Measure(name, "memory", LOWER), peaks.get(kind))
    if "objective_throughput_pixels_per_s" in table:
        add(Measure("throughput (pixels/s)", "throughput", HIGHER),
            table["objective_throughput_pixels_per_s"])
    metric, label = headline_metric(rows["dataset_name"].iloc[0])
    if metric in rows and rows[metric].notna().any():
        ordered = rows.sort_values("stop_val").groupby(RUN, sort=False)[metric]
        unit = DB if metric.endswith("_db") else ""  # PSNR, SNR: absolute dB
        add(Measure(f"best {label}", "quality", HIGHER, unit), ordered.max())
        add(Measure(f"final {label}", "quality", HIGHER, unit), ordered.last())
        if "time" in rows:  # each image its own target
            seconds = pd.concat([time_to_target(part, metric).runs["seconds"] for _, part in
                                 rows.groupby(images_of(rows).fillna(""), sort=False)])
            add(Measure(f"seconds to the common {label} target", "time", LOWER, target=True),
                seconds)
    return measures, pd.DataFrame(values, index=table.index)
