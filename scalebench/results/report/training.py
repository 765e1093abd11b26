"""The training view: throughput, and its trade-off with memory under checkpointing."""

from __future__ import annotations

import pandas as pd

from scalebench.results.report.data import Results, measured, parameter_text, per_run
from scalebench.results.report.figures import (
    FIGURE_WIDTH,
    SMALL_FONT,
    Table,
    View,
    bar_height,
    headroom,
    legend_below,
    new_figure,
    number,
    skip,
    wrap,
)


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
    labels = [wrap(results.labels[e]) for e in table.index]
    figure, axes = new_figure(min(FIGURE_WIDTH, 5 * panels),
                           1.2 + bar_height(labels) * len(labels), 1, panels)
    axes[0][0].barh(labels, table[throughput], height=0.7)
    axes[0][0].set(xlabel=throughput)
    axes[0][0].invert_yaxis()
    axes[0][0].tick_params(labelsize=SMALL_FONT)
    if panels == 2:
        for value, group in table.groupby(checkpointing, dropna=False):
            axes[0][1].scatter(group[peak], group[throughput],
                               label=f"{checkpointing}={parameter_text(value)}")
        axes[0][1].set(xlabel=peak, ylabel=throughput)
        axes[0][1].set_xlim(0, headroom(table[peak]))
        axes[0][1].set_ylim(0, headroom(table[throughput]))
        axes[0][1].tick_params(labelsize=SMALL_FONT)
        legend_below(figure, axes[0][1])
    summary = [[results.labels[e], number(row[throughput]),
                *([number(row[peak])] if panels == 2 else [])] for e, row in table.iterrows()]
    return View("training", "Training throughput and checkpointing trade-off", figure, rows,
                summary=Table(["run", throughput, *([peak] if panels == 2 else [])],
                              summary))
