"""How the runs of a results table ended, read from their rows (``provenance.stop_reasons``):
the report, the launcher's closing lines and ``compare`` read them here. Rows written before
stop reasons read as complete at their last iteration. Imports no torch."""

from __future__ import annotations

import pandas as pd

from provenance.stop_reasons import (
    ITERATION_COLUMN,
    REASON_COLUMN,
    Stop,
    checked_reason,
    optional_int,
    worst,
)


def stop_of(rows: pd.DataFrame) -> Stop:
    """How the runs of ``rows`` ended (one run, or the repetitions of one experiment: the
    worst of them); an old file's rows without a stop reason are complete at their last
    iteration."""
    runs = []
    for _, run in rows.groupby("idx_rep", sort=False) if "idx_rep" in rows else [(0, rows)]:
        reason = run[REASON_COLUMN].dropna() if REASON_COLUMN in run else pd.Series()
        if reason.empty:
            last = optional_int(run["stop_val"].max()) if "stop_val" in run else None
            runs.append(Stop(checked_reason(None), last, _max_iter(run)))
            continue
        iteration = run[ITERATION_COLUMN].dropna() if ITERATION_COLUMN in run else pd.Series()
        runs.append(Stop(checked_reason(reason.iloc[0]),
                         optional_int(iteration.iloc[0]) if len(iteration) else None,
                         _max_iter(run)))
    return worst(runs)


def _max_iter(rows: pd.DataFrame) -> int | None:
    values = rows["p_solver_max_iter"].dropna() if "p_solver_max_iter" in rows else []
    return optional_int(values.iloc[0]) if len(values) else None


def stops_by(rows: pd.DataFrame, key: str) -> dict[str, Stop]:
    """How each group of ``rows`` by column ``key`` (a run, an experiment) ended."""
    return {str(name): stop_of(group) for name, group in rows.groupby(key, sort=False)}
