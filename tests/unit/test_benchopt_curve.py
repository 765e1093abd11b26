"""benchopt's objective curve on rows missing a column: benchopt 1.10's own plot gives x and y
of different lengths there; scalebench's draws each solver's measured rows."""

from __future__ import annotations

import pandas as pd

from scalebench.benchopt_glue.plots import MeasuredObjectiveCurve

NAN = float("nan")


def _rows() -> pd.DataFrame:
    """pnp: a grad step from iteration 1; denoiser: no grad step at all."""
    return pd.DataFrame({
        "dataset_name": "d", "objective_name": "o", "idx_rep": 0,
        "solver_name": ["pnp"] * 3 + ["denoiser"] * 2,
        "stop_val": [0, 1, 2, 0, 1], "time": [0.0, 0.5, 1.25, 0.0, 0.25],
        "objective_grad_time_s": [NAN, 0.5, 0.75, NAN, NAN]})


def test_benchopt_s_own_curve_mismatches_x_and_y_on_these_rows():
    from benchopt.plotting.default_plots import ObjectiveCurvePlot

    curves = ObjectiveCurvePlot().plot(_rows(), "d", "o", "objective_grad_time_s", "Time")
    assert {c["label"]: (len(c["x"]), len(c["y"])) for c in curves} == {
        "denoiser": (2, 0), "pnp": (3, 2)}


def test_each_solver_s_curve_holds_its_measured_rows_only():
    plot = MeasuredObjectiveCurve()
    for axis, x in (("Time", [0.5, 1.25]), ("Iteration", [1, 2])):
        curves = plot.plot(_rows(), "d", "o", "objective_grad_time_s", axis)
        assert [(c["label"], c["x"], c["y"]) for c in curves] == [("pnp", x, [0.5, 0.75])]
