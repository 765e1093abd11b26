"""Plug-and-play proximal gradient: x <- D_sigma(x - gamma * A^T (A x - y)).

The loop neither knows nor cares whether its physics and denoiser are local or distributed:
it only calls ``physics.A``, ``physics.A_adjoint`` and ``denoiser(x, sigma)``, each inside a
profiler step ("grad" and "denoise").
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from scalebench.launch import progress
from scalebench.physics.distributed import RankStack, local_indices
from scalebench.problems.base import Problem, ProblemSetup
from scalebench.runtime.context import TimedContext
from scalebench.runtime.operator_norm import estimate_operator_norm
from scalebench.runtime.profiling import StepProfiler


def build_physics(setup: ProblemSetup, distribute: bool, context: TimedContext) -> Problem:
    """Every operator in this process, or this rank's share of them with a split adjoint."""
    progress.stage("building the operator")
    if not distribute:
        return setup.build(device=context.device)
    indices = local_indices(setup.num_operators, context.rank, context.world_size)
    problem = setup.build(indices, context.gather_values, context.device)
    problem.physics = RankStack(list(problem.physics.physics_list), context)
    if problem.norm_start is not None:
        problem.norm_start = RankStack(list(problem.norm_start.physics_list), context)
    return problem


def operator_norm_squared(problem: Problem, seed: int = 0) -> float:
    """||A||^2 by Lanczos on A^T A (deterministic), stopped at a relative error bound and
    cached on disk per operator configuration (scalebench.runtime.operator_norm)."""
    return estimate_operator_norm(problem, seed=seed).value


def point_source_response(problem: Problem) -> float:
    """(A^T A e)[c] for a unit point source e at the image centre c (the PSF peak)."""
    source = torch.zeros_like(problem.x_true)
    centre = (0, 0, *(size // 2 for size in source.shape[2:]))
    source[centre] = 1.0
    return float(problem.physics.A_adjoint(problem.physics.A(source))[centre])


def initial_estimate(problem: Problem, init: str, lipschitz: float) -> torch.Tensor:
    """zeros; the adjoint A^T y scaled by 1/||A||^2; deepinv's least-squares A^+ y; or the
    dirty image: A^T y scaled so that a unit point source at the centre gives 1."""
    with torch.no_grad():
        if init == "zeros":
            return torch.zeros_like(problem.x_true)
        if init == "adjoint":
            return problem.physics.A_adjoint(problem.y) / lipschitz
        if init == "dirty":
            return problem.physics.A_adjoint(problem.y) / point_source_response(problem)
        with warnings.catch_warnings():  # deepinv warns that stacked inputs skip its fast path
            warnings.simplefilter("ignore", UserWarning)
            return problem.physics.A_dagger(problem.y)


class PnPLoop:
    """State of a PnP reconstruction; ``iterate()`` performs one profiled iteration."""

    def __init__(self, problem: Problem, denoiser: nn.Module, denoiser_sigma: float,
                 step_size: float | None, init: str, profiler: StepProfiler) -> None:
        self.problem = problem
        self.denoiser = denoiser
        self.denoiser_sigma = denoiser_sigma
        progress.stage("operator norm")
        norm = estimate_operator_norm(problem)
        self.lipschitz = norm.value
        # Part of the set-up time, also reported alone (0 iterations when read from cache).
        self.setup_figures = {"operator_norm_time_s": norm.seconds,
                              "operator_norm_iterations": norm.iterations,
                              "operator_norm_start_iterations": norm.start_iterations}
        self.step_size = step_size if step_size is not None else 1.0 / self.lipschitz
        self.profiler = profiler
        progress.stage("initial estimate")
        self.x = initial_estimate(problem, init, self.lipschitz)

    @torch.no_grad()
    def iterate(self) -> None:
        physics, y = self.problem.physics, self.problem.y
        with self.profiler.step("grad"):
            z = self.x - self.step_size * physics.A_adjoint(physics.A(self.x) - y)
        with self.profiler.step("denoise"):
            self.x = self.denoiser(z, self.denoiser_sigma)
