"""Standalone denoiser timing on the noisy ground truth (scalebench.solvers.denoising)."""

from scalebench.benchopt_support import InferenceSolver
from scalebench.params import benchopt_parameters
from scalebench.solvers.denoising import DENOISING_PARAMS, DenoisingLoop, ground_truth_digest


class Solver(InferenceSolver):
    # Solver name in configs and results.
    name = "denoiser"
    # Contract of every parameter: scalebench.solvers.denoising.DENOISING_PARAMS; the noise
    # added to the ground truth has std denoiser_sigma.
    param_specs = DENOISING_PARAMS
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(DENOISING_PARAMS)
    # Installed with scalebench; no extra requirement.
    requirements = []

    def setup_problem(self, problem):
        # Only the ground truth is used: no operator is built.
        self.x_true = problem.x_true.to(self.device)
        self.source, self.data_sha256 = problem.source, ground_truth_digest(problem.x_true)

    def make_loop(self, profiler):
        p = self.params
        return DenoisingLoop(self.x_true, self.denoiser, p["denoiser_sigma"], p["seed"],
                             profiler)
