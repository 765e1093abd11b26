"""Imaging problems y = A x + n, by dataset name."""

from __future__ import annotations

from scalebench.errors import ConfigError
from scalebench.params import resolved_parameters, validate_parameters
from scalebench.problems import multiframe_superres, synthetic, tomography_2d
from scalebench.problems.base import Problem, ProblemSpec

PROBLEMS: dict[str, ProblemSpec] = {
    spec.name: spec for spec in (tomography_2d.SPEC, multiframe_superres.SPEC, synthetic.SPEC)
}


def build_problem(name: str, **params) -> Problem:
    """Validate ``params`` and build the named problem (defaults fill what is not given)."""
    if name not in PROBLEMS:
        raise ConfigError(f"unknown dataset '{name}' (allowed: {', '.join(sorted(PROBLEMS))})")
    spec = PROBLEMS[name]
    values = resolved_parameters(
        validate_parameters(f"dataset '{name}'", params, spec.params), spec.params)
    try:
        problem = spec.build(**values)
    except ValueError as error:
        raise ConfigError(f"dataset '{name}': {error}") from None
    problem.source = {"name": name, "params": values}
    return problem


__all__ = ["PROBLEMS", "Problem", "ProblemSpec", "build_problem"]
