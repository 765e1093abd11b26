"""The training view: throughput, and its trade-off with memory under checkpointing.

A run's repetitions are one bar and one point: their median throughput, with an error bar
from the lowest to the highest repetition (report.repetitions)."""

from __future__ import annotations

import pandas as pd

from scalebench.results.report.data import (
    Results,
    measured,
    parameter_text,
    per_run,
    run_labels,
)
from scalebench.results.report.figures import (
    FIGURE_WIDTH,
    SMALL_FONT,
    Table,
    View,
    bar_height,
    headroom,
    legend_below,
    new_figure,
    skip,
    wrap,
)
from scalebench.results.report.repetitions import ERROR_STYLE, draw_bars, repetitions


def training(results: Results) -> View:
    """Throughput, and its trade-off with memory under checkpointing (training results)."""
    rows = results.rows
    throughput = next((c for c in rows.columns if "throughput" in c
                       and pd.api.types.is_numeric_dtype(rows[c])), None)
    if throughput is None:
        return skip("training", "Training throughput", "no training results (no throughput "
                     "column)")
    table = per_run(rows)
    # The mode that ran ('auto' resolves to one), and what a step itself needs: its peak
    # increase on the device when measured there, else on the host.
    checkpointing = next((c for c in ("objective_checkpointing_used", "p_solver_checkpointing")
                          if c in table), None)
    peak = next(filter(None, (measured(table, f"objective_step_peak_increase_{kind}")
                              for kind in ("cuda_alloc_mib", "host_rss_mib"))), None)
    panels = 2 if checkpointing and peak else 1
    spread = repetitions(table, [throughput, *([peak] if peak else [])])
    names = run_labels(rows, ("idx_rep",))
    labels = [wrap(names[series]) for series in spread.first.index]
    figure, axes = new_figure(min(FIGURE_WIDTH, 5 * panels),
                           1.2 + bar_height(labels) * len(labels), 1, panels)
    draw_bars(axes[0][0], labels, spread, throughput)
    axes[0][0].set(xlabel=f"{throughput} (median over repetitions)")
    axes[0][0].invert_yaxis()
    axes[0][0].tick_params(labelsize=SMALL_FONT)
    if panels == 2:
        _trade_off(figure, axes[0][1], spread, checkpointing, peak, throughput)
    summary = [[names[series], spread.text(throughput, series),
                *([spread.text(peak, series)] if panels == 2 else [])]
               for series in spread.first.index]
    return View("training", "Training throughput and checkpointing trade-off", figure, rows,
                "a run's repetitions: the median, the lowest to the highest in brackets and "
                "as the error bar",
                summary=Table(["run", throughput, *([peak] if panels == 2 else [])],
                              summary))


def _trade_off(figure, axis, spread, checkpointing: str, peak: str, throughput: str) -> None:
    """Median throughput against median peak memory, per checkpointing mode, with error bars
    from the lowest to the highest repetition of each."""
    for value, group in spread.first.groupby(checkpointing, dropna=False):
        index = group.index
        axis.errorbar(spread.median.loc[index, peak], spread.median.loc[index, throughput],
                      xerr=spread.errors(peak, index) if spread.repeated() else None,
                      yerr=spread.errors(throughput, index) if spread.repeated() else None,
                      fmt="o", label=f"{checkpointing}={parameter_text(value)}", **ERROR_STYLE)
    axis.set(xlabel=peak, ylabel=throughput)
    axis.set_xlim(0, headroom(spread.high[peak]))
    axis.set_ylim(0, headroom(spread.high[throughput]))
    axis.tick_params(labelsize=SMALL_FONT)
    legend_below(figure, axis)

