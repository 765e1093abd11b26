"""A stack of operators split across ranks, whose adjoint does not depend on the split.

Each rank holds the operators ``operator_indices`` (a round-robin share of A_1..A_K) and its
measurements. A x returns the local A_k x; A^T y sums the local A_k^T y_k in float64, adds the
ranks' partial sums with one float64 all-reduce and rounds to the input's precision once.
Rounding a float64 sum to float32 gives the same float32 whatever order the (few) partial sums
were added in, except in cases of probability about 1e-9 per sample, so N ranks reproduce the
one-process reconstruction. deepinv's ``DistributedStackedLinearPhysics`` reduces in float32,
whose result changes with the number of ranks, stacks every local result before summing (one
more copy of the image per local operator) and broadcasts the shape before each reduction;
hence this class.
"""

from __future__ import annotations

import torch
from deepinv.physics import LinearPhysics
from deepinv.utils import TensorList

from scalebench.rank.context import TimedContext


def local_indices(num_operators: int, rank: int, world_size: int) -> list[int]:
    """Operators of ``rank``: k with k mod world_size == rank."""
    return [k for k in range(num_operators) if k % world_size == rank]


class RankStack(LinearPhysics):
    """The operators of one rank; A^T y is the global sum over every rank's operators."""

    def __init__(self, operators: list[LinearPhysics], context: TimedContext) -> None:
        super().__init__()
        self.operators = torch.nn.ModuleList(operators)
        self.context = context

    def A(self, x: torch.Tensor, **kwargs) -> TensorList:
        return TensorList([operator.A(x) for operator in self.operators])

    def A_adjoint(self, y: TensorList | list[torch.Tensor], **kwargs) -> torch.Tensor:
        total = None
        for operator, y_k in zip(self.operators, y, strict=True):
            part = operator.A_adjoint(y_k).double()
            total = part if total is None else total.add_(part)
        total = self.context.all_reduce(total)
        return total.to(y[0].dtype)
