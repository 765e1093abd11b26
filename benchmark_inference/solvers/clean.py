"""Högbom CLEAN of radio interferometry (loops.clean)."""

from scalebench.benchopt_glue.inference import BaselineSolver
from scalebench.loops import SOLVERS
from scalebench.loops.clean import CleanLoop
from scalebench.param_spec import benchopt_parameters


class Solver(BaselineSolver):
    # Solver name in configs and results.
    name = "clean"
    # What configs may give it (inference_parameters.CLEAN_SPEC); radio_interferometry only.
    spec = SOLVERS[name]
    # Contract of every parameter (type, range, meaning).
    param_specs = spec.params
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(param_specs)
    # Installed with scalebench; the radio operators' libraries are the dataset's extra.
    requirements = []
    # `benchopt test`: a small observation (the objective's test dataset is not radio).
    test_config = {"dataset": {"name": "radio_interferometry", "image_size": 32,
                               "num_times": 4, "num_channels": 1},
                   "max_iter": 3, "components_per_iter": 10, "device": "cpu"}

    def make_loop(self, profiler):
        # The first row has no component: a blank sky (image 'model') or the dirty image.
        p = self.params
        return CleanLoop(self.problem, p["gain"], p["threshold"], p["components_per_iter"],
                         profiler, p["image"])
