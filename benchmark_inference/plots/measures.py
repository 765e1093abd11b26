"""The measures benchopt draws for this benchmark (config.yml lists this plot alone): each
dataset's headline quality metric, each step's time and peak memory, against solver time;
scalebench.benchopt_glue.plots."""

from scalebench.benchopt_glue.plots import INFERENCE_MEASURES, MeasureCurve, measure_options


class Plot(MeasureCurve):
    # One figure per measure and dataset (benchopt's objective_curve draws every column).
    options = measure_options(INFERENCE_MEASURES)
