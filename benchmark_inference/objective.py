"""Objective of the inference benchmark: reconstruction quality and per-step cost."""

from benchopt import BaseObjective

from scalebench.metrics import quality_metrics


class Objective(BaseObjective):
    # Name shown in results and reports.
    name = "imaging_inverse_problem"
    # Everything is installed by the scalebench distribution (pyproject.toml); nothing here.
    requirements = []
    # Oldest benchopt whose callback and output format this benchmark relies on.
    min_benchopt_version = "1.10"
    # The objective itself has no parameters: datasets and solvers carry them all.
    parameters = {}

    def set_data(self, problem):
        # problem: scalebench.problems.Problem (physics, ground truth, measurements).
        self.problem = problem

    def get_objective(self):
        # Solvers receive the whole problem; they move it to their own device.
        return dict(problem=self.problem)

    def evaluate_result(self, x_hat, step_stats):
        # x_hat: the current estimate; step_stats: the profiler's figures of the latest
        # iteration ({step}_time_s, {step}_peak_host_rss_mib, {step}_peak_cuda_alloc_mib).
        # "value" (what benchopt plots by default and monitors) is the MSE.
        x_true = self.problem.x_true
        metrics = quality_metrics(x_hat.to(x_true.device), x_true)
        return dict(value=metrics["mse"], **metrics, **step_stats)

    def get_one_result(self):
        # A valid result for benchopt's own checks: the zero image, no step measured yet.
        return dict(x_hat=self.problem.x_true * 0, step_stats={})
