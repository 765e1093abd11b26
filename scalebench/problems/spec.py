"""How a problem is set up, without setting it up: its parameters, the shape of its ground
truth, its number of operators, and the function that builds it; and what the report and the
contract tests read of it: the parameters that grow its work, its headline metric and the
small instances its operator's adjoint is checked on. Imports no torch: the checks of a config
(scalebench.experiment.config) read every problem's spec before anything runs, and each
problem module imports its heavy parts only in ``setup``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scalebench.param_spec import Param, recorded_parameters
from scalebench.problems.images import ImageFamily

if TYPE_CHECKING:
    from scalebench.problems.base import ProblemSetup


# The metric a problem's quality is judged by (result column, label), unless its spec names
# another one.
DEFAULT_HEADLINE = ("objective_psnr_db", "PSNR")


@dataclass(frozen=True)
class AdjointCase:
    """A small instance of a problem whose operator tests/unit/test_adjointness.py checks for
    <A x, y> = <x, A^T y>: its parameters, and the optional library its backend needs
    ('astra', 'astra-cuda', 'rtk'; the case is skipped where it is missing)."""

    params: dict[str, Any]
    requires: str = ""


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
    # operators work in chunks (scalebench.planning.capacity fits its bytes); None: no
    # such term.
    workspace_elements: Callable[..., int] | None = None
    # Whether the data term's proximal operator can be computed (A and A^T as linear
    # operators: conjugate gradient, or a closed form): what splitting algorithms need.
    data_prox: bool = True
    # Old parameter names still accepted, with a warning: old -> new.
    renamed: dict[str, str] = field(default_factory=dict)
    # Parameters whose growth is more work, and the power the work grows with (counts of
    # views, frames, time steps or channels: 1; a 2D image's side: 2): the report's weak
    # scaling series keep (parameter ** power) / ranks fixed.
    work_parameters: dict[str, int] = field(default_factory=dict)
    # (result column, label) of the metric its quality is judged by, shown first in the report.
    headline: tuple[str, str] = DEFAULT_HEADLINE
    # At least one per backend its parameters offer (tests/unit/test_problem_specs.py).
    adjoint_cases: tuple[AdjointCase, ...] = ()
    # The ground truths it can be set up with and their validation and test splits (None:
    # one fixed ground truth, e.g. a measured scan).
    images: ImageFamily | None = None

    def recorded(self, values: dict) -> dict:
        """Resolved parameters ``values`` as a run records them (``ProblemSetup.source``,
        which its config hash covers): those left out at their default dropped
        (Param.omitted_at_default: ``image``, so that a run of the default image keeps the
        hash its runs had before the parameter existed)."""
        return recorded_parameters(values, self.params)

    def workspace(self, values: dict, chunk_elements: int | None = None) -> int:
        """``workspace_elements`` of resolved parameters ``values`` (0 without the term)."""
        if self.workspace_elements is None:
            return 0
        return self.workspace_elements(**values, chunk_elements=chunk_elements)
