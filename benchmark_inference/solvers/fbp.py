"""Filtered back-projection of 2D parallel-beam CT (loops.fbp)."""

from scalebench.benchopt_glue.inference import BaselineSolver
from scalebench.loops import SOLVERS
from scalebench.loops.fbp import FBPLoop
from scalebench.param_spec import benchopt_parameters


class Solver(BaselineSolver):
    # Solver name in configs and results.
    name = "fbp"
    # What configs may give it (inference_parameters.FBP_SPEC); tomography_2d only.
    spec = SOLVERS[name]
    # Contract of every parameter (type, range, meaning).
    param_specs = spec.params
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(param_specs)
    # Installed with scalebench; no extra requirement.
    requirements = []
    # `benchopt test`: a small CT (the objective's test dataset is not a CT), its one step.
    test_config = {"dataset": {"name": "tomography_2d", "image_size": 32, "num_angles": 20,
                               "projector": "torch"},
                   "max_iter": 1, "device": "cpu"}

    def make_loop(self, profiler):
        # Starts from the zero image; its one iteration is the reconstruction.
        return FBPLoop(self.problem, self.params["filter"], profiler)
