"""Standalone denoiser timing on the noisy ground truth (scalebench.solvers.denoising)."""

from scalebench.benchopt_support import LoopSolver
from scalebench.params import benchopt_parameters
from scalebench.solvers.denoising import DENOISING_PARAMS, DenoisingLoop


class Solver(LoopSolver):
    # Solver name in configs and results.
    name = "denoiser"
    # Contract of every parameter: scalebench.solvers.denoising.DENOISING_PARAMS; the noise
    # added to the ground truth has std denoiser_sigma.
    param_specs = DENOISING_PARAMS
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(DENOISING_PARAMS)
    # Installed with scalebench; no extra requirement.
    requirements = []

    def make_loop(self, profiler):
        p = self.params
        return DenoisingLoop(self.problem.x_true, self.denoiser, p["denoiser_sigma"],
                             p["seed"], profiler)
