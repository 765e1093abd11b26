"""How the runs of a results table ended, read from their rows (``provenance.stop_reasons``):
the report, the launcher's closing lines and ``compare`` read them here, and, for a run its
time limit cut, the timeout that would do (``limit_advice``). Rows written before stop
reasons read as complete at their last iteration. Imports no torch."""

from __future__ import annotations

import math

import pandas as pd

from provenance.stop_reasons import (
    ITERATION_COLUMN,
    REASON_COLUMN,
    TIME_LIMIT,
    Stop,
    checked_reason,
    optional_int,
    worst,
)
from scalebench.durations import TIME_MARGIN

SETUP_COLUMN = "objective_setup_time_s"  # a run's set-up, its operator norm included


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


def limit_advice(run: pd.DataFrame, stop: Stop, recorded: dict | None) -> str:
    """For a run its time limit cut (``stop``), the timeout that would do: from the prediction
    the launch recorded for its experiment (``recorded``: the run status's time limits entry,
    results.store.TIME_LIMITS_KEY), else from its measured set-up and seconds per iteration
    extrapolated to its max_iter, each with ``TIME_MARGIN``; where no iteration was timed and
    nothing was predicted, how long its set-up alone took. "" for any other stop."""
    if stop.reason != TIME_LIMIT:
        return ""
    recorded = recorded or {}
    given = f"timeout {_seconds(recorded['timeout_s'])}, " if recorded.get("timeout_s") else ""
    margin = f"with a {TIME_MARGIN - 1:.0%} margin"
    if recorded.get("advised_timeout_s"):
        return (f"{given}{recorded['advised_timeout_s']} s would do: plan's prediction "
                f"{_seconds(recorded['predicted_s'])} {margin}")
    setup = _first(run, SETUP_COLUMN)
    iterations, solver_s = stop.iteration or 0, _last_time(run)
    if not iterations or solver_s is None or stop.max_iter is None:
        took = "" if setup is None else f": its set-up alone took {_seconds(setup)}"
        return f"{given}no iteration timed{took}, and no prediction was made: calibrate one " \
               f"with scalebench capacity --time"
    per_iteration = solver_s / iterations
    needed = math.ceil(TIME_MARGIN * ((setup or 0.0) + stop.max_iter * per_iteration))
    after = "" if setup is None else f" after {_seconds(setup)} of set-up"
    return (f"{given}{needed} s would do: its measured {_seconds(per_iteration)} per "
            f"iteration extrapolated to {stop.max_iter} iterations{after}, {margin}, no "
            f"prediction made")


def _first(rows: pd.DataFrame, column: str) -> float | None:
    values = rows[column].dropna() if column in rows else pd.Series(dtype=float)
    return float(values.iloc[0]) if len(values) else None


def _last_time(rows: pd.DataFrame) -> float | None:
    """The solver time (the iterations') of the run's last evaluated iteration."""
    if "time" not in rows or rows["time"].dropna().empty:
        return None
    return float(rows.sort_values("stop_val")["time"].dropna().iloc[-1])


def _seconds(value: float) -> str:
    """Seconds as the closing line says them: three significant digits."""
    return f"{value:.3g} s"
