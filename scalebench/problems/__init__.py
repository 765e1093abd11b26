"""Imaging problems y = A x + n, by dataset name: each module holds a problem's spec (its
parameters, shapes, set-up and image family) and imports its heavy parts only when it sets up,
so that this registry imports no torch (``spec``: ProblemSpec; ``base``: the problem as set up
and built; ``images``: the image families and their validation and test splits)."""

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
from scalebench.problems.images import SPLITS, ImageFamily, Split
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
    setup.source = {"name": name, "params": spec.recorded(values)}
    return setup


def build_problem(name: str, **params) -> Problem:
    """The named problem with every operator, in this process."""
    return setup_problem(name, **params).build()


def image_family(problem: str) -> ImageFamily:
    """The image family of dataset ``problem``; ConfigError for a problem without one."""
    spec = PROBLEMS.get(problem)
    if spec is None or spec.images is None:
        families = ", ".join(sorted(name for name, spec in PROBLEMS.items() if spec.images))
        raise ConfigError(f"dataset '{problem}' has no image family (datasets with one: "
                          f"{families})")
    return spec.images


def split_of(problem: str, image: str) -> Split | None:
    """The split of ``problem``'s family that holds ``image``: 'validation', 'test', or None
    for an image of the family in neither; ConfigError for a name outside the family."""
    family = image_family(problem)
    try:
        return family.split_of(image)
    except ValueError as error:
        raise ConfigError(f"dataset '{problem}': {error}") from None


def split_images(problem: str, split: str) -> list[str]:
    """The images of ``problem``'s ``split`` ('validation' or 'test'), in order."""
    family = image_family(problem)
    if split not in SPLITS:
        raise ConfigError(f"unknown split '{split}' (allowed: {', '.join(SPLITS)})")
    return list(family.split(split))


def image_of(problem: str, params: dict) -> str | None:
    """The image dataset parameters ``params`` (defaults filled in) set ``problem`` up
    with; None where they replace the family's image (a FITS sky)."""
    return image_family(problem).name_of(resolved_parameters(params, PROBLEMS[problem].params))


__all__ = ["PROBLEMS", "build_problem", "image_family", "image_of", "setup_problem",
           "split_images", "split_of"]
