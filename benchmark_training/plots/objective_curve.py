"""benchopt's objective curve on the rows that measured each column (a step's figures are
missing at iteration 0 and for solvers without that step): scalebench.benchopt_glue.plots."""

from scalebench.benchopt_glue.plots import MeasuredObjectiveCurve


class Plot(MeasuredObjectiveCurve):
    # Replaces benchopt's own objective_curve: benchopt keeps the data of the last plot of a
    # name, and lists a benchmark's plots after its own.
    name = "objective_curve"
