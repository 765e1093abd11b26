"""What the rest of scalebench asks of an inference solver, without running it: its
parameters, whether it builds the operator A and the measurements y, whether it runs a
denoiser, and the checks of its parameters against a dataset. Imports no torch: the checks of
a config read every solver's spec before anything runs. The registry is
``scalebench.loops.SOLVERS``; a solver file of a benchmark folder that is not registered is
read from its own class (``scalebench.experiment.benchmark_files``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scalebench.errors import ConfigError
from scalebench.param_spec import Param

if TYPE_CHECKING:
    from scalebench.problems.spec import ProblemSpec

# (problem spec, its resolved parameters, image shape (C, *spatial), solver parameters) ->
# None, or ConfigError naming what does not fit.
ProblemCheck = Callable[["ProblemSpec", dict, tuple[int, ...], dict], None]


def no_check(problem: ProblemSpec, values: dict, shape: tuple[int, ...], params: dict) -> None:
    """A solver that applies to every dataset of the benchmark."""


@dataclass(frozen=True)
class SolverSpec:
    """An inference solver as configs name it."""

    name: str
    description: str
    params: dict[str, Param]
    # Builds A and y (memory grows with the measurements and the operator's workspace).
    uses_operator: bool
    # Runs a denoiser: the denoiser's size, tiling, weights and distribution checks apply.
    uses_denoiser: bool
    # Checks that need the dataset too (an algorithm's data prox, a baseline's geometry).
    check_problem: ProblemCheck = field(default=no_check)
    # Old parameter names still accepted, with a warning: old -> new.
    renamed: dict[str, str] = field(default_factory=dict)
    # The datasets it applies to (fbp: tomography_2d); empty: every one. A config pairing it
    # with none of them is refused; one listing it beside datasets it applies to runs it on
    # those only; a config leaving the solver section out (every solver) skips it.
    datasets: tuple[str, ...] = ()
    # Parameters whose growth is more work per run, and the power it grows with (the report's
    # weak scaling series, as ProblemSpec.work_parameters).
    work_parameters: dict[str, int] = field(default_factory=dict)

    def applies_to(self, dataset: str) -> bool:
        return not self.datasets or dataset in self.datasets

    def check_applies(self, dataset: str) -> None:
        """Raise ConfigError when the solver does not apply to ``dataset`` (the caller names
        the solver and the dataset)."""
        if not self.applies_to(dataset):
            raise ConfigError(f"does not apply (it applies to dataset "
                              f"{', '.join(self.datasets)} only)")
