"""The per-step view: the time of each step of an iteration, per reconstruction run.

Columns are the steps the runs have (a step no run measured has none; a run without a step
shows '-' there, not a zero it never measured), communication one column only where some run
communicated, and the CPU the steps kept busy one column (their time-weighted mean), so that
ten runs of five methods fit the page. The standalone denoiser, which reconstructs nothing,
has its own view (report.denoiser).
"""

from __future__ import annotations

import pandas as pd

from scalebench.rank.names import INFERENCE_STEPS
from scalebench.results.report.data import Results, measured, per_run
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
    number,
    skip,
    wrap,
)
from scalebench.results.report.methods import reconstructions
from scalebench.results.report.order import reading_order


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


def _figure(results: Results, times: pd.DataFrame, communication: pd.DataFrame,
            communicated: bool):
    parts = {}
    for step in times.columns:
        parts[f"{step} (compute)" if communicated else step] = \
            (times[step] - communication[step].fillna(0.0)).clip(lower=0)
        if communicated and communication[step].fillna(0.0).gt(0).any():
            parts[f"{step} (communication)"] = communication[step]
    frame = pd.DataFrame(parts).fillna(0.0)  # the bars only: a missing step draws nothing
    labels = [wrap(results.labels[e]) for e in frame.index]
    figure, axes = new_figure(FIGURE_WIDTH, 0.9 + bar_height(labels) * len(frame)
                              + legend_height(list(parts), FIGURE_WIDTH))
    axis = axes[0][0]
    frame.set_axis(labels).plot.barh(stacked=True, ax=axis, width=0.7, legend=False)
    axis.set_xlim(0, headroom(frame.sum(axis=1)))
    axis.set(xlabel="seconds per iteration (mean; maximum over ranks)", ylabel="")
    axis.invert_yaxis()
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(axis="x", alpha=0.3)
    legend_below(figure, axis)
    return figure


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
    figure = _figure(results, times, communication, communicated)
    busy = cpu_busy(table, times)
    summary = [[results.labels[e], *(number(times.loc[e, step]) for step in times.columns),
                *([number(communication.loc[e].sum(min_count=1))] if communicated else []),
                number(times.loc[e].sum(min_count=1)), number(busy[e])]
               for e in table.index]
    header = ["run", *(f"{step} (s)" for step in times.columns),
              *(["of which communication (s)"] if communicated else []), "total (s)",
              "CPU busy (cores)"]
    return View("steps", "Per-step time of the reconstructions", figure, rows,
                "mean seconds per iteration of each step a run has ('-': the run has no such "
                "step), maximum over ranks; communication is the time inside collectives, "
                "counted in its step; CPU busy: CPU time of the rank's threads over the "
                "steps' wall time (cores kept busy, mean over ranks, weighted by step time)",
                Table(header, summary))
