"""Objective of the training benchmark: the cost and the progress of each training step."""

import math

from benchopt import BaseObjective

from scalebench.benchmarks import TRAINING
from scalebench.rank.names import METRIC_NAMES

# The provenance stamp (torch, deepinv) is imported where a run first needs it: `benchopt
# plot` loads this file too and does not need it (about 10 s of imports).


class Objective(BaseObjective):
    # Name shown in results and reports; configs name it under `objective`.
    name = TRAINING.objective
    # Everything is installed by the scalebench distribution (pyproject.toml); nothing here.
    requirements = []
    # Oldest benchopt whose callback and output format this benchmark relies on.
    min_benchopt_version = "1.10"
    # The objective itself has no parameters: datasets and solvers carry them all.
    parameters = {}
    # benchopt's own test suite (`benchopt test`) trains every solver on this small dataset.
    test_config = {"dataset": {"name": "synthetic", "image_size": 32, "task": "denoising"}}

    def set_data(self, problem):
        # problem: scalebench.problems.ProblemSetup whose ground truth the patches come from;
        # solvers build the patches, operators and validation image on their rank and device.
        self.problem = problem

    def get_objective(self):
        # Solvers receive the whole problem.
        return dict(problem=self.problem)

    def evaluate_result(self, quality, step_stats, checkpointing, parameters, run_provenance):
        # quality: validation PSNR/SSIM/MSE/asinh-PSNR of this iteration (NaN where not
        # evaluated); step_stats: the latest step's figures with their max and mean over
        # ranks (scalebench.loops.training.step.Trainer.figures); checkpointing: the mode used;
        # parameters: every trained parameter flattened (its digest is the row's result);
        # run_provenance: the run's fixed provenance. "value" is the training loss.
        from scalebench.rank.stamping import row_provenance

        loss = step_stats.get("loss", math.nan)
        return dict(value=loss, **quality, **step_stats, checkpointing_used=checkpointing,
                    **row_provenance(run_provenance, parameters))

    def get_one_result(self):
        # A valid result for benchopt's own checks: nothing trained or measured yet.
        import torch

        return dict(quality=dict.fromkeys(METRIC_NAMES, math.nan), step_stats={},
                    checkpointing="none", parameters=torch.zeros(1), run_provenance={})
