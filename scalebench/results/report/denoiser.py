"""The standalone denoiser's view, apart from the reconstructions: the time of one denoiser
call per run, with its peak memory and the quality of what it denoised.

The ``denoiser`` solver denoises the noisy ground truth, another task than reconstructing
the measurements: its quality (a denoised image is much closer to the truth than any
reconstruction of sparse measurements) on the reconstructions' axes would read as the best
reconstruction, so the quality, per-step and time-to-quality views leave it out and this view
shows its timing. A run's repetitions are one bar: their median, with an error bar from the
lowest to the highest (report.repetitions).
"""

from __future__ import annotations

from scalebench.results.report.data import (
    RUN,
    Results,
    headline_metric,
    measured,
    per_run,
    run_labels,
)
from scalebench.results.report.figures import (
    SMALL_FONT,
    Table,
    View,
    bar_height,
    headroom,
    new_figure,
    skip,
    wrap,
)
from scalebench.results.report.methods import NOT_RECONSTRUCTIONS, solver_of
from scalebench.results.report.repetitions import draw_bars, repetitions

QUALITY = "quality"  # column added: the headline metric of the run's last output


def standalone_denoiser(results: Results) -> View:
    rows = results.rows[results.rows["solver_name"].map(solver_of).isin(NOT_RECONSTRUCTIONS)]
    if rows.empty:
        return skip("denoiser", "Standalone denoiser", "no standalone denoiser run")
    table = per_run(rows)
    time = measured(table, "objective_denoise_time_s")
    if time is None:
        return skip("denoiser", "Standalone denoiser", "no denoiser time column "
                    "(objective_denoise_time_s)")
    peak = measured(table, "objective_denoise_peak_host_rss_mib")
    last = rows.sort_values("stop_val").groupby(RUN, sort=False).last()
    table[QUALITY] = [last.loc[run, headline_metric(name)[0]]
                      if headline_metric(name)[0] in last else float("nan")
                      for run, name in table["dataset_name"].items()]
    spread = repetitions(table, [time, QUALITY, *([peak] if peak else [])])
    names = run_labels(results.rows, ("idx_rep",))
    labels = [wrap(names[series]) for series in spread.first.index]
    figure, axes = new_figure(8, 0.9 + bar_height(labels) * len(labels))
    axis = axes[0][0]
    draw_bars(axis, labels, spread, time, color="tab:purple")
    axis.set_xlim(0, headroom(spread.high[time]))
    axis.set(xlabel="seconds per denoiser call (mean; maximum over ranks; median over "
             "repetitions)")
    axis.invert_yaxis()
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(axis="x", alpha=0.3)
    summary = [[names[series], spread.text(time, series),
                spread.text(peak, series, 5) if peak else "-",
                f"{headline_metric(row['dataset_name'])[1]} {spread.text(QUALITY, series, 4)}"]
               for series, row in spread.first.iterrows()]
    return View("denoiser", "Standalone denoiser: time per call", figure, rows,
                "the denoiser alone on the noisy ground truth (another task than the "
                "reconstructions, drawn apart from them); quality: its last output against "
                "the truth; a run's repetitions: the median, the lowest to the highest in "
                "brackets and as the error bar",
                Table(["run", "seconds per call", "peak host memory (MiB)",
                       "quality of its output (dB)"], summary))
