"""CGLS: conjugate gradient on the normal equations A^T A x = A^T y from x = 0, without
regularisation. Its iterates minimise ||A x - y|| over growing Krylov subspaces; on noisy data
the error to the ground truth first falls, then rises as the noise is fitted
(semi-convergence): every row is one iteration, so the rows draw that curve, the floor any
regularised method must beat.

Each iteration applies A^T A once, in the "grad" step (the operators of the data term's
gradient). CG's scalars are reductions of image-space vectors, replicated on every rank, so a
run with distributed physics takes the same steps as one process."""

from __future__ import annotations

import torch

from scalebench.launch import progress
from scalebench.loops.pnp import ConjugateGradient
from scalebench.problems.base import Problem
from scalebench.rank.profiling import StepProfiler


class CGLSLoop:
    """State of a CGLS run; ``iterate()`` performs one profiled CG iteration."""

    def __init__(self, problem: Problem, profiler: StepProfiler) -> None:
        self.profiler = profiler
        physics = problem.physics
        progress.stage("right-hand side A^T y")
        with torch.no_grad():
            right = physics.A_adjoint(problem.y)
        self.solver = ConjugateGradient(lambda v: physics.A_adjoint(physics.A(v)), right, None)

    @property
    def x(self) -> torch.Tensor:
        return self.solver.x

    @torch.no_grad()
    def iterate(self) -> None:
        with self.profiler.step("grad"):
            self.solver.step()
