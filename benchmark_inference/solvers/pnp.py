"""Plug-and-play reconstruction; its algorithm parameter picks the iteration (loops.pnp)."""

from scalebench.benchopt_glue.inference import InferenceSolver
from scalebench.loops import SOLVERS
from scalebench.loops.pnp import PnPLoop, build_physics
from scalebench.param_spec import benchopt_parameters


class Solver(InferenceSolver):
    # Solver name in configs and results.
    name = "pnp"
    # What configs may give it and the checks it needs (inference_parameters.PNP_SPEC).
    spec = SOLVERS[name]
    # Contract of every parameter (type, range, meaning).
    param_specs = spec.params
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(param_specs)
    # Installed with scalebench; no extra requirement.
    requirements = []

    def setup_problem(self, problem):
        # This rank's operators and measurements (all of them unless distribute_physics).
        self.problem = build_physics(problem, self.params["distribute_physics"], self.context)
        return self.problem.data_sha256

    def make_loop(self, profiler):
        return PnPLoop(self.problem, self.denoiser, self.params, profiler)
