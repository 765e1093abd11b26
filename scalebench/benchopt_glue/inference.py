"""The inference benchmark's solvers: a reconstruction or denoising loop around one denoiser
(``InferenceSolver``), or a classical baseline that runs none (``BaselineSolver``)."""

from __future__ import annotations

from abc import abstractmethod

import torch

from scalebench.benchopt_glue.base import LoopSolver
from scalebench.denoisers.build import make_denoiser_with_record, warm_up
from scalebench.denoisers.tiles import check_denoiser_fits
from scalebench.errors import ConfigError
from scalebench.launch import progress
from scalebench.loops.inference_parameters import check_distribution
from scalebench.loops.pnp import build_physics
from scalebench.loops.spec import SolverSpec
from scalebench.param_spec import resolved_parameters
from scalebench.problems import PROBLEMS
from scalebench.problems.base import ProblemSetup


class InferenceSolver(LoopSolver):
    """A reconstruction or denoising loop of the inference benchmark around one denoiser."""

    def build(self, problem: ProblemSetup) -> torch.nn.Module:
        params, shape = self.params, tuple(problem.x_true.shape[1:])
        check_denoiser_fits(params, shape)
        check_distribution(params, shape, problem.num_operators, self.context.world_size)
        self.data_sha256 = self.setup_problem(problem)
        self.ground_truth = problem.x_true  # kept for save_estimate
        progress.stage("building the denoiser")
        self.denoiser, self.weights_record = make_denoiser_with_record(
            params, shape, self.device, self.context)
        if params["compile"]:
            progress.stage("compiling the denoiser")
        self.compile_time_s = warm_up(self.denoiser, shape, params["denoiser_sigma"],
                                      self.device) if params["compile"] else 0.0
        return self.denoiser  # the same weights on every rank

    @abstractmethod
    def setup_problem(self, problem: ProblemSetup) -> str:
        """Build what the loop needs of the problem; return the digest of the data it uses
        (every rank checks it holds the same)."""


class BaselineSolver(LoopSolver):
    """A classical reconstruction (cgls, fbp, fdk, clean) over the problem's operators: no
    denoiser is built, so no weights are recorded and nothing is compiled."""

    compile_time_s = 0.0
    spec: SolverSpec  # the registry's entry: its check_problem says which datasets apply

    def skip(self, problem: ProblemSetup) -> tuple[bool, str | None]:
        # Under plain benchopt (scalebench run refuses the pair before anything runs): a
        # dataset the baseline does not apply to is skipped with the same one-line reason.
        # the dataset's name and parameters (problem.name may name a variant of it)
        problem_spec = PROBLEMS[problem.source["name"]]
        values = resolved_parameters(problem.source["params"], problem_spec.params)
        try:
            self.spec.check_applies(problem_spec.name)
            self.spec.check_problem(problem_spec, values, tuple(problem.x_true.shape[1:]),
                                    self.params)
        except ConfigError as error:
            return True, str(error)
        return False, None

    def build(self, problem: ProblemSetup) -> torch.nn.Module:
        params, shape = self.params, tuple(problem.x_true.shape[1:])
        check_distribution(params, shape, problem.num_operators, self.context.world_size)
        # This rank's operators and measurements (all of them unless distribute_physics).
        self.problem = build_physics(problem, params["distribute_physics"], self.context)
        self.data_sha256 = self.problem.data_sha256
        self.ground_truth = problem.x_true  # kept for save_estimate
        return torch.nn.Module()  # no weights: the ranks compare their data only
