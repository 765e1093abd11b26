"""Objective of the inference benchmark: reconstruction quality and per-step cost."""

from benchopt import BaseObjective

from scalebench.metrics import quality_metrics
from scalebench.stamping import OBJECTIVE_NAME, row_provenance


class Objective(BaseObjective):
    # Name shown in results and reports.
    name = OBJECTIVE_NAME
    # Everything is installed by the scalebench distribution (pyproject.toml); nothing here.
    requirements = []
    # Oldest benchopt whose callback and output format this benchmark relies on.
    min_benchopt_version = "1.10"
    # The objective itself has no parameters: datasets and solvers carry them all.
    parameters = {}
    # benchopt's own test suite (`benchopt test`) runs every solver on this small dataset.
    test_config = {"dataset": {"name": "synthetic", "image_size": 32, "task": "denoising"}}

    def set_data(self, problem):
        # problem: scalebench.problems.ProblemSetup (ground truth, operator factory, noise);
        # solvers build the operators and measurements they need on their rank and device.
        self.problem = problem

    def get_objective(self):
        # Solvers receive the whole problem; they move it to their own device.
        return dict(problem=self.problem)

    def evaluate_result(self, x_hat, step_stats, run_record):
        # x_hat: the current estimate; step_stats: the profiler's figures of the latest
        # iteration ({step}_time_s, {step}_peak_host_rss_mib, {step}_peak_cuda_alloc_mib);
        # run_record: the run's fixed provenance (scalebench.stamping.run_record).
        # "value" (what benchopt plots by default and monitors) is the MSE. Provenance
        # fields (prov_*) are stamped here, in the process that computed the row.
        x_true = self.problem.x_true
        metrics = quality_metrics(x_hat.to(x_true.device), x_true)
        return dict(value=metrics["mse"], **metrics, **step_stats,
                    **row_provenance(run_record, x_hat))

    def get_one_result(self):
        # A valid result for benchopt's own checks: the zero image, no step measured yet.
        return dict(x_hat=self.problem.x_true * 0, step_stats={}, run_record={})
