"""Supervised training of an unrolled PnP proximal-gradient network (scalebench.loops.training)."""

from scalebench.benchopt_glue.training import TrainingSolver
from scalebench.loops.training.parameters import TRAINING_PARAMS
from scalebench.param_spec import benchopt_parameters


class Solver(TrainingSolver):
    # Solver name in configs and results.
    name = "unrolled_pgd"
    # Contract of every parameter (type, range, meaning): TRAINING_PARAMS.
    param_specs = TRAINING_PARAMS
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(TRAINING_PARAMS)
    # Installed with scalebench; no extra requirement.
    requirements = []
