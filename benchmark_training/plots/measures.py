"""The measures benchopt draws for this benchmark (config.yml lists this plot alone): the
training loss, the validation PSNR, each step's time and the step's peak memory, against
solver time; scalebench.benchopt_glue.plots."""

from scalebench.benchopt_glue.plots import TRAINING_MEASURES, MeasureCurve, measure_options


class Plot(MeasureCurve):
    # One figure per measure and dataset (benchopt's objective_curve draws every column).
    options = measure_options(TRAINING_MEASURES)
