"""How a problem is set up, without setting it up: its parameters, the shape of its ground
truth, its number of operators, and the function that builds it. Imports no torch: the checks
of a config (scalebench.experiment.config) read every problem's spec before anything runs,
and each problem module imports its heavy parts only in ``setup``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scalebench.param_spec import Param

if TYPE_CHECKING:
    from scalebench.problems.base import ProblemSetup


@dataclass(frozen=True)
class ProblemSpec:
    """How to set up a problem: its parameters and the function that takes them."""

    name: str
    params: dict[str, Param]
    setup: Callable[..., ProblemSetup]
    # (C, *spatial) of the ground truth for these parameters, without building anything;
    # raises ValueError when the parameters are inconsistent with each other.
    image_shape: Callable[..., tuple[int, ...]]
    # Number of operators A_k for these parameters (what distribute_physics splits).
    num_operators: Callable[..., int]
    description: str
    # Elements of the largest temporary one application of an operator makes, for these
    # parameters and a chunk limit (``chunk_elements=None``: the operator's own), where its
    # operators work in chunks (scalebench.experiment.capacity fits its bytes); None: no
    # such term.
    workspace_elements: Callable[..., int] | None = None
    # Whether the data term's proximal operator can be computed (A and A^T as linear
    # operators: conjugate gradient, or a closed form): what splitting algorithms need.
    data_prox: bool = True
    # Old parameter names still accepted, with a warning: old -> new.
    renamed: dict[str, str] = field(default_factory=dict)

    def workspace(self, values: dict, chunk_elements: int | None = None) -> int:
        """``workspace_elements`` of resolved parameters ``values`` (0 without the term)."""
        if self.workspace_elements is None:
            return 0
        return self.workspace_elements(**values, chunk_elements=chunk_elements)
