"""Standalone denoiser timing on the noisy ground truth (scalebench.loops.denoising)."""

from scalebench.benchopt_glue.inference import InferenceSolver
from scalebench.loops import SOLVERS
from scalebench.loops.denoising import DenoisingLoop, ground_truth_digest
from scalebench.param_spec import benchopt_parameters


class Solver(InferenceSolver):
    # Solver name in configs and results.
    name = "denoiser"
    # What configs may give it (inference_parameters.DENOISING_SPEC).
    spec = SOLVERS[name]
    # Contract of every parameter; the noise added to the ground truth has std
    # denoiser_sigma.
    param_specs = spec.params
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(param_specs)
    # Installed with scalebench; no extra requirement.
    requirements = []

    def setup_problem(self, problem):
        # Only the ground truth is used: no operator is built.
        self.x_true = problem.x_true.to(self.device)
        return ground_truth_digest(problem.x_true)

    def make_loop(self, profiler):
        p = self.params
        return DenoisingLoop(self.x_true, self.denoiser, p["denoiser_sigma"], p["seed"],
                             profiler)
