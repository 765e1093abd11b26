"""The problem abstraction shared by all datasets: physics, ground truth and measurements."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from deepinv.physics import LinearPhysics, StackedLinearPhysics
from deepinv.utils import TensorList

from provenance import array_digest
from scalebench.params import Param


@dataclass
class Problem:
    """An inverse problem y = A x + n.

    ``physics`` is a stack of linear operators A_1..A_K (K >= 1) that can be split across
    ranks: A x = (A_1 x, ..., A_K x) and A^T y = sum_k A_k^T y_k. ``y`` holds one measurement
    tensor per operator.
    """

    name: str
    physics: StackedLinearPhysics
    x_true: torch.Tensor  # (1, C, *spatial)
    y: TensorList
    noise_std: float  # absolute standard deviation of the Gaussian noise added to A x
    # What built it: {"name": dataset name, "params": every resolved parameter}.
    source: dict = field(default_factory=dict)

    @property
    def num_unknowns(self) -> int:
        return self.x_true.numel()

    def to(self, device: torch.device | str) -> Problem:
        """The same problem with every tensor and operator on ``device``."""
        device = torch.device(device)
        return replace(self, physics=self.physics.to(device), x_true=self.x_true.to(device),
                       y=TensorList([y_k.to(device) for y_k in self.y]))

    def data_digest(self) -> str:
        """sha256 over the digests of the ground truth and of every measurement tensor."""
        parts = [array_digest(self.x_true), *(array_digest(y_k) for y_k in self.y)]
        return hashlib.sha256("".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class ProblemSpec:
    """How to build a problem: its parameters and the function that takes them."""

    name: str
    params: dict[str, Param]
    build: Callable[..., Problem]
    # (C, *spatial) of the ground truth for these parameters, without building anything;
    # raises ValueError when the parameters are inconsistent with each other.
    image_shape: Callable[..., tuple[int, ...]]
    description: str


def stack(operators: list[LinearPhysics]) -> StackedLinearPhysics:
    """Operators as one stacked physics whose adjoint sums over the stack."""
    return StackedLinearPhysics(operators)


def measure(name: str, physics: StackedLinearPhysics, x_true: torch.Tensor,
            noise_level: float, seed: int) -> Problem:
    """Simulate y = A x + n with Gaussian n of std ``noise_level`` x RMS(A x), seeded."""
    with torch.no_grad():
        clean = physics.A(x_true)
    squares = sum(float(torch.sum(c.double() ** 2)) for c in clean)
    count = sum(c.numel() for c in clean)
    noise_std = noise_level * (squares / count) ** 0.5
    generator = torch.Generator(device=x_true.device).manual_seed(seed)
    noisy = [
        c + noise_std * torch.randn(c.shape, generator=generator, device=c.device, dtype=c.dtype)
        for c in clean
    ]
    return Problem(name, physics, x_true, TensorList(noisy), noise_std)
