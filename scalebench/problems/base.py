"""The problem abstraction shared by all datasets: physics, ground truth and measurements.

A dataset returns a ``ProblemSetup``: the ground truth and a factory of the operators
A_1..A_K, nothing built yet. A solver then builds the ``Problem`` it needs: every operator in
one process, or only the operators of its rank (``operator_indices``) when the physics is
distributed. Measurements do not depend on that split: operator k's noise comes from its own
generator (seeded by the dataset seed and k), and the noise level from the sums of squares of
every A_k x gathered in operator order, so any split builds the same y_k bit for bit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch
from deepinv.physics import LinearPhysics, StackedLinearPhysics
from deepinv.utils import TensorList

from provenance import array_digest

# Gathers one list of Python values per rank (rank order); a single process passes identity.
Gather = Callable[[list], list[list]]


def _local_only(values: list) -> list[list]:
    return [values]


@dataclass
class Problem:
    """An inverse problem y = A x + n, as held by one process.

    ``physics`` is a stack of linear operators (those of ``operator_indices`` among the
    problem's ``num_operators``): A x = (A_k x)_k and A^T y = sum_k A_k^T y_k. ``y`` holds one
    measurement tensor per local operator.
    """

    name: str
    physics: StackedLinearPhysics
    x_true: torch.Tensor  # (1, C, *spatial)
    y: TensorList
    noise_std: float  # absolute standard deviation of the Gaussian noise added to A x
    # What built it: {"name": dataset name, "params": every resolved parameter}.
    source: dict = field(default_factory=dict)
    operator_indices: tuple[int, ...] = ()
    num_operators: int = 0
    data_sha256: str = ""  # digest of x_true and of every y_k of the whole problem
    # The parameters that determine A (scalebench.rank.operator_norm caches ||A||^2 under them);
    # None: the norm is recomputed by every run.
    operator_key: dict | None = None
    # The local operators over a fraction of their measurements (ProblemSetup.make_norm_start),
    # stacked like ``physics``; None: ||A||^2 starts from a random vector.
    norm_start: StackedLinearPhysics | None = None

    @property
    def num_unknowns(self) -> int:
        return self.x_true.numel()

    def to(self, device: torch.device | str) -> Problem:
        """The same problem with every tensor and operator on ``device``."""
        device = torch.device(device)
        start = None if self.norm_start is None else moved(self.norm_start, device)
        return replace(self, physics=moved(self.physics, device), x_true=self.x_true.to(device),
                       y=TensorList([y_k.to(device) for y_k in self.y]), norm_start=start)


@dataclass
class ProblemSetup:
    """Ground truth and operator factory of a problem; ``build`` measures what a rank needs."""

    name: str
    x_true: torch.Tensor
    num_operators: int
    make_operator: Callable[[int], LinearPhysics]  # k -> A_k, on the CPU
    noise_level: float  # noise std relative to RMS(A x) over all operators
    seed: int
    source: dict = field(default_factory=dict)
    # k -> measured data of operator k (real scans); None: y_k = A_k x_true + noise.
    measure: Callable[[int], torch.Tensor] | None = None
    operator_key: dict | None = None  # see Problem.operator_key
    # Dynamic range the asinh-PSNR covers (scalebench.rank.metrics); None: the metrics' default.
    metric_dynamic_range: float | None = None
    # k -> A_k over a fraction of its measurements (a cheap operator whose A^T A has nearly
    # the top eigenvector of the whole one): ||A||^2's Lanczos starts from the leading
    # vector of their stack (scalebench.rank.operator_norm). None: from a random vector.
    make_norm_start: Callable[[int], LinearPhysics] | None = None

    @property
    def num_unknowns(self) -> int:
        return self.x_true.numel()

    def build(self, indices: Sequence[int] | None = None, gather: Gather = _local_only,
              device: torch.device | str = "cpu") -> Problem:
        """The problem restricted to operators ``indices`` (all when None), on ``device``.

        ``gather`` collects per-rank lists when ranks build disjoint operator sets that
        together cover 0..K-1; it is the identity in one process.
        """
        indices = tuple(range(self.num_operators)) if indices is None else tuple(indices)
        x_true = self.x_true.to(device)
        operators = [self.make_operator(k).to(device) for k in indices]
        with torch.no_grad():
            clean = [self.measure(k).to(device) if self.measure else operator.A(x_true)
                     for k, operator in zip(indices, operators, strict=True)]
        local = [(k, float(torch.sum(c.double() ** 2)), c.numel())
                 for k, c in zip(indices, clean, strict=True)]
        per_operator = sorted(item for part in gather(local) for item in part)
        if [k for k, _, _ in per_operator] != list(range(self.num_operators)):
            raise ValueError("ranks must build disjoint operator sets covering every operator")
        squares = sum(s for _, s, _ in per_operator)  # operator order: the same on every rank
        count = sum(n for _, _, n in per_operator)
        noise_std = self.noise_level * (squares / count) ** 0.5
        y = [c + noise_std * operator_noise(c, self.seed, k)
             for k, c in zip(indices, clean, strict=True)]
        digests = sorted(item for part in gather([(k, array_digest(y_k))
                                                   for k, y_k in zip(indices, y, strict=True)])
                         for item in part)
        parts = [array_digest(x_true), *(digest for _, digest in digests)]
        start = None if self.make_norm_start is None else \
            stack([self.make_norm_start(k).to(device) for k in indices])
        return Problem(self.name, stack(operators), x_true, TensorList(y), noise_std,
                       self.source, indices, self.num_operators,
                       hashlib.sha256("".join(parts).encode()).hexdigest(), self.operator_key,
                       start)


def operator_noise(clean: torch.Tensor, seed: int, k: int) -> torch.Tensor:
    """Unit Gaussian noise shaped like ``clean``, from operator k's own seeded generator.

    Drawn on the CPU so that every device and every split of the operators sees the same
    numbers.
    """
    generator = torch.Generator().manual_seed(seed * 1_000_003 + k)
    noise = torch.randn(clean.shape, generator=generator, dtype=clean.dtype)
    return noise.to(clean.device)


def stack(operators: list[LinearPhysics]) -> StackedLinearPhysics:
    """Operators as one stacked physics whose adjoint sums over the stack."""
    return StackedLinearPhysics(operators)


def moved(stacked: StackedLinearPhysics, device: torch.device) -> StackedLinearPhysics:
    """The stack with each operator on ``device``: the stack keeps its operators in a plain
    list, which its own ``to`` does not reach."""
    return stack([operator.to(device) for operator in stacked.physics_list])
