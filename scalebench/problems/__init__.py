"""Imaging problems y = A x + n, by dataset name: each module holds a problem's spec (its
parameters, shapes and set-up) and imports its heavy parts only when it sets up, so that this
registry imports no torch (``spec``: ProblemSpec; ``base``: the problem as set up and built)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalebench.errors import ConfigError
from scalebench.param_spec import resolved_parameters, validate_parameters
from scalebench.problems import (
    multiframe_superres,
    radio_interferometry,
    synthetic,
    tomography_2d,
    walnut_conebeam,
)
from scalebench.problems.spec import ProblemSpec

if TYPE_CHECKING:
    from scalebench.problems.base import Problem, ProblemSetup

PROBLEMS: dict[str, ProblemSpec] = {
    spec.name: spec for spec in (tomography_2d.SPEC, multiframe_superres.SPEC, synthetic.SPEC,
                                radio_interferometry.SPEC, walnut_conebeam.SPEC)
}


def setup_problem(name: str, *, problems: dict[str, ProblemSpec] | None = None,
                  **params) -> ProblemSetup:
    """Validate ``params`` and set up the named problem of ``problems`` (default: PROBLEMS,
    the inference benchmark's); defaults fill what is not given."""
    problems = PROBLEMS if problems is None else problems
    if name not in problems:
        raise ConfigError(f"unknown dataset '{name}' (allowed: {', '.join(sorted(problems))})")
    spec = problems[name]
    values = resolved_parameters(
        validate_parameters(f"dataset '{name}'", params, spec.params), spec.params)
    from scalebench.rank.metrics import data_range

    try:
        setup = spec.setup(**values)
        data_range(setup.x_true)  # a constant ground truth has no PSNR or SSIM: refused here
    except ValueError as error:
        raise ConfigError(f"dataset '{name}': {error}") from None
    setup.source = {"name": name, "params": values}
    return setup


def build_problem(name: str, **params) -> Problem:
    """The named problem with every operator, in this process."""
    return setup_problem(name, **params).build()


__all__ = ["PROBLEMS", "build_problem", "setup_problem"]
