"""The standalone denoiser's view, apart from the reconstructions: the time of one denoiser
call per run, with its peak memory and the quality of what it denoised.

The ``denoiser`` solver denoises the noisy ground truth, another task than reconstructing
the measurements: its quality (a denoised image is much closer to the truth than any
reconstruction of sparse measurements) on the reconstructions' axes would read as the best
reconstruction, so the quality, per-step and time-to-quality views leave it out and this view
shows its timing.
"""

from __future__ import annotations

from scalebench.results.report.data import RUN, Results, headline_metric, measured, per_run
from scalebench.results.report.figures import (
    SMALL_FONT,
    Table,
    View,
    bar_height,
    headroom,
    new_figure,
    number,
    skip,
    wrap,
)
from scalebench.results.report.methods import NOT_RECONSTRUCTIONS, solver_of


def standalone_denoiser(results: Results) -> View:
    rows = results.rows[results.rows["solver_name"].map(solver_of).isin(NOT_RECONSTRUCTIONS)]
    if rows.empty:
        return skip("denoiser", "Standalone denoiser", "no standalone denoiser run")
    table = per_run(rows)
    time = measured(table, "objective_denoise_time_s")
    if time is None:
        return skip("denoiser", "Standalone denoiser", "no denoiser time column "
                    "(objective_denoise_time_s)")
    labels = [wrap(results.labels[e]) for e in table.index]
    figure, axes = new_figure(8, 0.9 + bar_height(labels) * len(labels))
    axis = axes[0][0]
    axis.barh(labels, table[time], color="tab:purple", height=0.7)
    axis.set_xlim(0, headroom(table[time]))
    axis.set(xlabel="seconds per denoiser call (mean; maximum over ranks)")
    axis.invert_yaxis()
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(axis="x", alpha=0.3)
    peak = measured(table, "objective_denoise_peak_host_rss_mib")
    last = rows.sort_values("stop_val").groupby(RUN, sort=False).last()
    summary = []
    for run in table.index:
        column, metric = headline_metric(table.loc[run, "dataset_name"])
        quality = last.loc[run, column] if column in last else None
        summary.append([results.labels[run], number(table.loc[run, time]),
                        number(table.loc[run, peak] if peak else None, 5),
                        f"{metric} {number(quality, 4)}"])
    return View("denoiser", "Standalone denoiser: time per call", figure, rows,
                "the denoiser alone on the noisy ground truth (another task than the "
                "reconstructions, drawn apart from them); quality: its last output against "
                "the truth",
                Table(["run", "seconds per call", "peak host memory (MiB)",
                       "quality of its output (dB)"], summary))
