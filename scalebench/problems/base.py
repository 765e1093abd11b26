"""The problem abstraction shared by all datasets: physics, ground truth and measurements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from deepinv.physics import LinearPhysics, StackedLinearPhysics
from deepinv.utils import TensorList

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

    @property
    def num_unknowns(self) -> int:
        return self.x_true.numel()

    def to(self, device: torch.device | str) -> Problem:
        """The same problem with every tensor and operator on ``device``."""
        device = torch.device(device)
        return Problem(
            name=self.name,
            physics=self.physics.to(device),
            x_true=self.x_true.to(device),
            y=TensorList([y_k.to(device) for y_k in self.y]),
            noise_std=self.noise_std,
        )


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
