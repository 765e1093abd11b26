"""Objective of the inference benchmark: reconstruction quality and per-step cost."""

from pathlib import Path

from benchopt import BaseObjective

from scalebench.benchmarks import INFERENCE
from scalebench.experiment.benchmark_files import register_benchmark_denoisers

# The metrics and the provenance stamp (torch, deepinv) are imported where a run first needs
# them: `benchopt plot` loads this file too and needs neither (about 10 s of imports).

# Denoisers defined in this folder's denoisers/*.py join scalebench's registry in every process
# that runs the benchmark (docs/extending.md).
register_benchmark_denoisers(Path(__file__).parent)


class Objective(BaseObjective):
    # Name shown in results and reports.
    name = INFERENCE.objective
    # Everything is installed by the scalebench distribution (pyproject.toml); nothing here.
    requirements = []
    # Oldest benchopt whose callback and output format this benchmark relies on.
    min_benchopt_version = "1.10"
    # The objective itself has no parameters: datasets and solvers carry them all.
    parameters = {}
    # benchopt's own test suite (`benchopt test`) runs every solver on this dataset (its
    # small size is the dataset's own test_config, so that a solver naming another dataset
    # does not inherit parameters that dataset lacks).
    test_config = {"dataset": {"name": "synthetic"}}

    def set_data(self, problem):
        # problem: scalebench.problems.ProblemSetup (ground truth, operator factory, noise);
        # solvers build the operators and measurements they need on their rank and device.
        self.problem = problem
        # The ground truth on the device of the latest estimate (copied there once per run).
        self.truth_on_device = problem.x_true

    def get_objective(self):
        # Solvers receive the whole problem; they move it to their own device.
        return dict(problem=self.problem)

    def evaluate_result(self, x_hat, step_stats, run_provenance):
        # x_hat: the current estimate; step_stats: the profiler's figures of the latest
        # iteration and the run's set-up figures; run_provenance: the run's fixed provenance
        # (scalebench.rank.stamping.run_provenance). Metrics are computed on x_hat's device
        # in bounded memory (scalebench.rank.metrics); a non-finite x_hat gives NaN metrics
        # and diverged true, which ends the run. "value" (what benchopt plots by default) is
        # the MSE; asinh_dynamic_range records the range the asinh-PSNR covered. Provenance
        # fields (prov_*) are stamped here, in the process that computed the row.
        from scalebench.rank.metrics import DEFAULT_DYNAMIC_RANGE, quality_metrics
        from scalebench.rank.stamping import row_provenance

        if self.truth_on_device.device != x_hat.device:
            self.truth_on_device = self.problem.x_true.to(x_hat.device)
        dynamic_range = self.problem.metric_dynamic_range or DEFAULT_DYNAMIC_RANGE
        metrics = quality_metrics(x_hat, self.truth_on_device, dynamic_range)
        return dict(value=metrics["mse"], **metrics, asinh_dynamic_range=dynamic_range,
                    **step_stats, **row_provenance(run_provenance, x_hat))

    def get_one_result(self):
        # A valid result for benchopt's own checks: the zero image, no step measured yet.
        return dict(x_hat=self.problem.x_true * 0, step_stats={}, run_provenance={})
