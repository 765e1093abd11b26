"""The benchopt glue of the training benchmark: a dataset is a training problem, a solver
trains for ``max_iter`` steps, each step one benchopt iteration.

Iteration 0 is the untrained model. Every ``eval_every`` steps (and at iteration 0) the
model reconstructs the validation image outside the measured step; the other rows carry NaN
quality figures.
"""

from __future__ import annotations

import math

import torch

from scalebench.benchmarks import TRAINING
from scalebench.benchopt_glue.base import LoopSolver, ProblemDataset
from scalebench.launch import progress
from scalebench.loops.training.parameters import check_training
from scalebench.loops.training.patches import TrainingData
from scalebench.loops.training.step import (
    Trainer,
    build_model,
    choose_checkpointing,
    set_checkpointing,
)
from scalebench.problems.base import ProblemSetup
from scalebench.rank.metrics import METRIC_NAMES, quality_metrics
from scalebench.rank.profiling import StepProfiler
from scalebench.rank.rank_checks import rank_statistics


class TrainingDataset(ProblemDataset):
    """A benchopt Dataset built by the training benchmark's problem ``name``."""

    problems = TRAINING.problems


class TrainingSolver(LoopSolver):
    """Trains the unrolled network for ``max_iter`` steps on one problem."""

    benchmark_name, objective_name = TRAINING.folder, TRAINING.objective
    # benchopt's own test suite (`benchopt test`) trains a tiny network for a few steps.
    test_config = {"max_iter": 3, "device": "cpu", "num_stages": 2, "denoiser_width": 4,
                   "denoiser_depth": 2, "patch_size": 16, "batch_size": 2}

    def build(self, problem: ProblemSetup) -> torch.nn.Module:
        params = self.params
        spec = TRAINING.problems[problem.source["name"]]
        check_training(params, spec, problem.source["params"], self.context.world_size)
        progress.stage("preparing the training data")
        self.data = TrainingData(problem, spec, params["patch_size"], params["seed"],
                                 self.device)
        self.data_sha256 = self.data.data_sha256
        progress.stage("building the model")
        self.model = build_model(params, self.data, self.context)
        # Every run starts from these weights (benchopt may run a solver more than once).
        self.initial_state = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.compile_time_s = 0.0
        return self.model

    def make_loop(self, profiler: StepProfiler) -> Trainer:
        trainer = Trainer(self.model, self.data, self.params, self.context, profiler)
        mode, estimates = self.params["checkpointing"], {}
        if mode == "auto":
            mode, estimates = choose_checkpointing(self.model, self.data, self.params,
                                                   trainer.indices)
        set_checkpointing(self.model, mode)
        self.checkpointing_used = mode
        self.activation_estimate_mib = estimates.get(mode, math.nan)
        self.model.load_state_dict(self.initial_state)
        return trainer

    def get_next(self, stop_val: int) -> int:
        # Every step is a row (its cost figures); eval_every spaces the validation only.
        return stop_val + 1

    def estimate(self) -> None:
        """None: a training run's result is the network, not an image estimate."""
        return None

    def _validation(self) -> dict[str, float]:
        step = self.loop.step_index
        if step % self.params["eval_every"] and step != self.params["max_iter"]:
            return dict.fromkeys(METRIC_NAMES, math.nan)
        problem = self.data.validation
        with torch.no_grad():
            x_hat = self.model(problem.y, problem.physics)
        return quality_metrics(x_hat, problem.x_true)

    def get_result(self) -> dict:
        stats = rank_statistics(self.context, self.loop.figures())
        figures = {**stats, **self.setup_figures,
                   "activation_estimate_mib": self.activation_estimate_mib}
        return dict(quality=self._validation(), step_stats=figures,
                    checkpointing=self.checkpointing_used,
                    parameters=self.loop.parameters_vector(), run_provenance=self.run_provenance)
