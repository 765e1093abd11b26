"""The per-step view: the time of each step of an iteration, per reconstruction run.

Columns are the steps the runs have (a step no run measured has none; a run without a step
shows '-' there, not a zero it never measured), communication one column only where some run
communicated, and the CPU the steps kept busy one column (their time-weighted mean), so that
ten runs of five methods fit the page. The standalone denoiser, which reconstructs nothing,
has its own view (report.denoiser). A run's repetitions are one bar: the median of each step,
with an error bar from the lowest to the highest repetition's total (report.repetitions).
"""

from __future__ import annotations

import pandas as pd

from scalebench.rank.names import INFERENCE_STEPS
from scalebench.results.report.data import Results, measured, per_run, run_labels
from scalebench.results.report.figures import (
    FIGURE_WIDTH,
    SMALL_FONT,
    Table,
    View,
    bar_height,
    headroom,
    legend_below,
    legend_height,
    new_figure,
    skip,
    wrap,
)
from scalebench.results.report.methods import reconstructions
from scalebench.results.report.order import reading_order
from scalebench.results.report.repetitions import Repetitions, draw_ranges, repetitions

TOTAL, COMMUNICATED, BUSY = "total", "communication", "busy"


def step_times(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per ``per_run`` row: each measured step's time (NaN where the run has no such step)
    and the part of it spent in collectives (NaN likewise); steps no run measured left out."""
    times, communication = {}, {}
    for step in INFERENCE_STEPS:
        time = measured(table, f"objective_{step}_time_s")
        if time is None:
            continue
        times[step] = table[time]
        comm = measured(table, f"objective_{step}_comm_time_s")
        communication[step] = table[comm].where(table[time].notna()) if comm \
            else table[time] * 0
    return pd.DataFrame(times, index=table.index), pd.DataFrame(communication, index=table.index)


def cpu_busy(table: pd.DataFrame, times: pd.DataFrame) -> pd.Series:
    """Per run: the cores its steps kept busy, the mean of each step's CPU busy weighted by the
    step's time (NaN where no step recorded it)."""
    weighted, weights = 0.0, 0.0
    for step in times.columns:
        column = measured(table, f"objective_{step}_cpu_utilization", "mean")
        if column is None:
            continue
        known = table[column].notna() & times[step].notna()
        weighted = weighted + (table[column] * times[step]).where(known, 0.0)
        weights = weights + times[step].where(known, 0.0)
    if isinstance(weights, float):
        return pd.Series(float("nan"), index=table.index)
    return (weighted / weights).where(weights > 0)


def _figure(labels: list[str], steps: list[str], spread: Repetitions, communicated: bool):
    """Stacked bars of each series' median step times (compute and communication apart),
    with an error bar from the lowest to the highest repetition's total."""
    times, communication = spread.median[steps], spread.median[[f"{COMMUNICATED} {s}"
                                                                 for s in steps]]
    parts = {}
    for step in steps:
        spent = communication[f"{COMMUNICATED} {step}"]
        parts[f"{step} (compute)" if communicated else step] = \
            (times[step] - spent.fillna(0.0)).clip(lower=0)
        if communicated and spent.fillna(0.0).gt(0).any():
            parts[f"{step} (communication)"] = spent
    frame = pd.DataFrame(parts).fillna(0.0)  # the bars only: a missing step draws nothing
    figure, axes = new_figure(FIGURE_WIDTH, 0.9 + bar_height(labels) * len(frame)
                              + legend_height(list(parts), FIGURE_WIDTH))
    axis = axes[0][0]
    frame.set_axis(labels).plot.barh(stacked=True, ax=axis, width=0.7, legend=False)
    ends = frame.sum(axis=1)
    draw_ranges(axis, range(len(frame)), ends, spread.low[TOTAL], spread.high[TOTAL],
                spread.count)
    axis.set_xlim(0, headroom(pd.concat([ends, spread.high[TOTAL]])))
    axis.set(xlabel="seconds per iteration (mean; maximum over ranks; median over "
             "repetitions)", ylabel="")
    axis.invert_yaxis()
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(axis="x", alpha=0.3)
    legend_below(figure, axis)
    return figure


def _per_run(table: pd.DataFrame, times: pd.DataFrame,
             communication: pd.DataFrame) -> pd.DataFrame:
    """Per run: each step's time and communication, the total, the communication in all
    steps and the CPU busy, the figures a series takes the median and range of."""
    return pd.concat([times, communication.add_prefix(f"{COMMUNICATED} "),
                      times.sum(axis=1, min_count=1).rename(TOTAL),
                      communication.sum(axis=1, min_count=1).rename(COMMUNICATED),
                      cpu_busy(table, times).rename(BUSY)], axis=1)


def step_breakdown(results: Results) -> View:
    rows = reconstructions(results.rows)
    if rows.empty:
        return skip("steps", "Per-step time", "no reconstruction run (the standalone "
                    "denoiser has its own view)")
    table = reading_order(per_run(rows), rows)
    times, communication = step_times(table)
    if times.empty:
        return skip("steps", "Per-step time", "no per-step time column "
                    "(objective_grad_time_s, objective_denoise_time_s, ...)")
    communicated = bool(communication.fillna(0.0).gt(0).any().any())
    spread = repetitions(_per_run(table, times, communication),
                         [*times.columns, *(f"{COMMUNICATED} {s}" for s in times.columns),
                          TOTAL, COMMUNICATED, BUSY])
    names = run_labels(results.rows, ("idx_rep",))
    labels = [names[series] for series in spread.first.index]
    figure = _figure([wrap(label) for label in labels], list(times.columns), spread,
                     communicated)
    summary = [[label, *(spread.text(step, series) for step in times.columns),
                *([spread.text(COMMUNICATED, series)] if communicated else []),
                spread.text(TOTAL, series), spread.text(BUSY, series)]
               for label, series in zip(labels, spread.first.index, strict=True)]
    header = ["run", *(f"{step} (s)" for step in times.columns),
              *(["of which communication (s)"] if communicated else []), "total (s)",
              "CPU busy (cores)"]
    return View("steps", "Per-step time of the reconstructions", figure, rows,
                "mean seconds per iteration of each step a run has ('-': the run has no such "
                "step), maximum over ranks; communication is the time inside collectives, "
                "counted in its step; CPU busy: CPU time of the rank's threads over the "
                "steps' wall time (cores kept busy, mean over ranks, weighted by step time); "
                "a run's repetitions: the median, the lowest to the highest in brackets and "
                "as the error bar of the total",
                Table(header, summary))
