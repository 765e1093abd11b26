"""benchopt's objective curve, drawn from the rows that measured the plotted column.

benchopt 1.10's ``ObjectiveCurvePlot`` takes a solver's y values from a pivot table, which
drops every iteration whose value is missing, but its time axis from every iteration: a
column missing at some rows gives x and y of different lengths, and matplotlib refuses the
curve ("x and y must have same first dimension"; the HTML page gets a curve with no points).
scalebench's rows hold such columns by design: a step's figures are missing at iteration 0
(no step ran yet) and on every row of a solver without that step (the standalone denoiser
has no ``grad`` step and no operator norm). Filling them with numbers would print figures that
were never measured, so the curve is drawn on the rows that measured the column instead: each
solver's curve has its measured points, a solver that never measures a column has none.
"""

from __future__ import annotations

import pandas as pd
from benchopt.plotting.default_plots import ObjectiveCurvePlot


class MeasuredObjectiveCurve(ObjectiveCurvePlot):
    """benchopt's ``objective_curve`` (same name, options and figures), on the rows where the
    plotted column was measured. A benchmark's ``plots/objective_curve.py`` subclasses it:
    benchopt keeps the data of the last plot of a name, and lists a benchmark's plots after
    its own."""

    def plot(self, df: pd.DataFrame, dataset: str, objective: str, objective_column: str,
             X_axis: str) -> list[dict]:
        if pd.api.types.is_numeric_dtype(df[objective_column]):
            df = df[df[objective_column].notna()]
        return super().plot(df, dataset, objective, objective_column, X_axis)
