"""Plug-and-play proximal gradient reconstruction (scalebench.loops.pnp)."""

from scalebench.benchopt_glue.inference import InferenceSolver
from scalebench.loops.params import PNP_PARAMS
from scalebench.loops.pnp import PnPLoop, build_physics
from scalebench.params import benchopt_parameters


class Solver(InferenceSolver):
    # Solver name in configs and results.
    name = "pnp"
    # Contract of every parameter (type, range, meaning): scalebench.loops.params.PNP_PARAMS.
    param_specs = PNP_PARAMS
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(PNP_PARAMS)
    # Installed with scalebench; no extra requirement.
    requirements = []

    def setup_problem(self, problem):
        # This rank's operators and measurements (all of them unless distribute_physics).
        self.problem = build_physics(problem, self.params["distribute_physics"], self.context)
        return self.problem.data_sha256

    def make_loop(self, profiler):
        p = self.params
        return PnPLoop(self.problem, self.denoiser, p["denoiser_sigma"], p["step_size"],
                       p["init"], profiler)
