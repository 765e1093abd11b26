"""Plug-and-play reconstruction: the algorithms of scalebench.loops.algorithms (proximal
gradient, FISTA, HQS, ADMM, DRS, DPIR, RED) over three measured steps.

The loop neither knows nor cares whether its physics and denoiser are local or distributed:
it only calls ``physics.A``, ``physics.A_adjoint`` and ``denoiser(x, sigma)``, each inside a
profiler step ("grad", "prox" and "denoise").
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from scalebench.data.norm_lookup import run_key
from scalebench.launch import progress
from scalebench.loops.algorithms import ALGORITHMS
from scalebench.loops.algorithms.spec import run_step
from scalebench.physics.distributed import RankStack, local_indices
from scalebench.problems.base import Problem, ProblemSetup
from scalebench.rank.context import TimedContext
from scalebench.rank.operator_norm import estimate_operator_norm
from scalebench.rank.profiling import StepProfiler


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
    cached on disk per operator configuration (scalebench.rank.operator_norm)."""
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


def _norm_run_key(problem: Problem, params: dict) -> dict | None:
    """What this run's config says of its norm (data.norm_lookup.run_key); None for a
    problem not set up from a dataset's parameters."""
    if "name" not in problem.source:
        return None
    return run_key(problem.source["name"], problem.source["params"],
                   problem.x_true.device.type, params.get("num_threads", 0))


class PnPLoop:
    """State of a PnP reconstruction; ``iterate()`` performs one profiled iteration of the
    configured algorithm (scalebench.loops.algorithms), whose steps are timed as "grad",
    "prox" and "denoise"."""

    def __init__(self, problem: Problem, denoiser: nn.Module, params: dict,
                 profiler: StepProfiler) -> None:
        self.problem = problem
        self.denoiser = denoiser
        self.params = params
        self.sigma = params["denoiser_sigma"]
        self.profiler = profiler
        progress.stage("operator norm")
        norm = estimate_operator_norm(problem, run_key=_norm_run_key(problem, params))
        self.lipschitz = norm.value
        # Part of the set-up time, also reported alone (0 iterations when read from cache).
        self.setup_figures = {"operator_norm_time_s": norm.seconds,
                              "operator_norm_iterations": norm.iterations,
                              "operator_norm_start_iterations": norm.start_iterations,
                              "operator_norm_start_time_s": norm.start_seconds}
        algorithm = ALGORITHMS[params["algorithm"]]
        self.step_size = run_step(algorithm, params, self.lipschitz)
        # On every row: which ||A||^2 and gamma the run used (NaN: dpir's gammas follow its
        # schedule).
        self.setup_figures.update(operator_norm_sq=self.lipschitz, step_size=(
            self.step_size if algorithm.uses_step else float("nan")))
        progress.stage("initial estimate")
        x0 = initial_estimate(problem, params["init"], self.lipschitz)
        self.prox = DataProx(problem, params["cg_tolerance"], params["cg_max_iter"]) \
            if ALGORITHMS[params["algorithm"]].needs_prox else None
        self.k = 0
        self.state = ALGORITHMS[params["algorithm"]].start(self, x0)

    @property
    def x(self) -> torch.Tensor:
        return self.state.x

    @torch.no_grad()
    def iterate(self) -> None:
        self.state.step(self, self.k)
        self.k += 1

    def gradient(self, x: torch.Tensor) -> torch.Tensor:
        """A^T (A x - y), the data term's gradient, in the "grad" step."""
        physics = self.problem.physics
        with self.profiler.step("grad"):
            return physics.A_adjoint(physics.A(x) - self.problem.y)

    def data_prox(self, z: torch.Tensor, gamma: float) -> torch.Tensor:
        """The data term's proximal operator at ``z`` with weight ``gamma``, in the "prox"
        step; its conjugate-gradient iterations are a figure of the step."""
        with self.profiler.step("prox"):
            x = self.prox(z, gamma)
        self.profiler.last["prox_cg_iterations"] = float(self.prox.iterations)
        return x

    def denoise(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        with self.profiler.step("denoise"):
            return self.denoiser(x, sigma)

    def relax(self, new: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """beta new + (1 - beta) previous (beta: ``relaxation``; 1 keeps ``new`` as is)."""
        beta = self.params["relaxation"]
        return new if beta == 1.0 else beta * new + (1 - beta) * previous


class DataProx:
    """argmin_x 1/2 ||A x - y||^2 + 1/(2 gamma) ||x - z||^2, i.e. the solution of
    (A^T A + rho I) x = A^T y + rho z with rho = 1 / gamma.

    Where every operator is the identity (denoising) A^T A is K I and the solution is
    closed-form; otherwise conjugate gradient, started from the previous call's solution
    (successive calls solve nearby systems, so few iterations are needed after the first),
    stopped when the residual falls below ``tolerance`` times the right-hand side's norm or
    after ``max_iterations``. Every quantity CG reduces lives in image space, replicated on
    every rank, so distributed physics takes the same decisions on every rank.
    """

    def __init__(self, problem: Problem, tolerance: float, max_iterations: int) -> None:
        from deepinv.physics import Denoising

        physics = problem.physics
        self.physics = physics
        self.adjoint_y = physics.A_adjoint(problem.y)
        # A stack in one process, or this rank's share (RankStack).
        operators = list(getattr(physics, "physics_list", None) or physics.operators)
        identity = all(type(op) is Denoising for op in operators)
        # Each rank holds its share of the identities: A^T A = (all operators) I.
        self.gram_scale = float(problem.num_operators) if identity else None
        self.tolerance, self.max_iterations = tolerance, max_iterations
        self.previous: torch.Tensor | None = None
        self.iterations = 0

    def __call__(self, z: torch.Tensor, gamma: float) -> torch.Tensor:
        rho = 1.0 / gamma
        right = self.adjoint_y + rho * z
        if self.gram_scale is not None:
            self.iterations = 0
            return right / (self.gram_scale + rho)
        x = z if self.previous is None else self.previous
        x, self.iterations = conjugate_gradient(
            lambda v: self.physics.A_adjoint(self.physics.A(v)) + rho * v, right, x,
            self.tolerance, self.max_iterations)
        self.previous = x
        return x


class ConjugateGradient:
    """Conjugate gradient on apply(x) = right (apply symmetric positive definite), one
    iteration per ``step()``: the data prox runs it to a tolerance, the ``cgls`` baseline
    one measured iteration at a time. Every quantity it reduces lives in image space, so
    distributed physics (whose ``apply`` all-reduces) takes the same decisions on every rank."""

    def __init__(self, apply, right: torch.Tensor, start: torch.Tensor | None) -> None:
        """``start`` None: from zero, whose residual is ``right`` without applying anything."""
        self.apply = apply
        self.x = torch.zeros_like(right) if start is None else start
        self.residual = right if start is None else right - apply(start)
        self.direction = self.residual
        self.squared = float(torch.sum(self.residual * self.residual))

    def step(self) -> torch.Tensor:
        """One iteration: x moves along the direction to the minimum of the quadratic."""
        if self.squared == 0.0:  # already solved: a further step would divide by zero
            return self.x
        image = self.apply(self.direction)
        alpha = self.squared / float(torch.sum(self.direction * image))
        self.x = self.x + alpha * self.direction
        self.residual = self.residual - alpha * image
        previous, self.squared = self.squared, float(torch.sum(self.residual * self.residual))
        self.direction = self.residual + (self.squared / previous) * self.direction
        return self.x


def conjugate_gradient(apply, right: torch.Tensor, start: torch.Tensor, tolerance: float,
                       max_iterations: int) -> tuple[torch.Tensor, int]:
    """Solve apply(x) = right (apply symmetric positive definite) from ``start``; return x
    and the iterations run (0 when ``start`` already meets the tolerance)."""
    solver = ConjugateGradient(apply, right, start)
    bound = tolerance ** 2 * float(torch.sum(right * right))
    iterations = 0
    while solver.squared > bound and iterations < max_iterations:
        solver.step()
        iterations += 1
    return solver.x, iterations
