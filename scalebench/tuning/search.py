"""What one study searches: a configuration of the config (an experiment without its image and
its tuned parameters), the parameters tuned with their ranges (the declared space of its
algorithm and denoiser, narrowed to those the config's ``tune:`` section names, each range
overridable there), and the validation images it is judged on.

``tune:`` maps a parameter to null (its declared range) or to ``[low, high]``; every range is
checked against the parameter's bounds (scalebench.loops.algorithms.spaces.check_range).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from scalebench.errors import ConfigError
from scalebench.loops.algorithms.spaces import Range, Space, check_range, space_for
from scalebench.problems import PROBLEMS, split_images, split_of

TUNED_SOLVER = "pnp"  # the solver whose parameters have declared spaces


@dataclass(frozen=True)
class Search:
    """One study: ``dataset`` and ``solver`` as (name, fixed parameters), the ``ranges``
    searched and the validation ``images``."""

    dataset: tuple[str, dict[str, Any]]
    solver: tuple[str, dict[str, Any]]
    ranges: tuple[Range, ...]
    images: tuple[str, ...]

    @property
    def label(self) -> str:
        name, params = self.solver
        fixed = ",".join(f"{k}={params[k]}" for k in ("algorithm", "denoiser") if k in params)
        return f"{self.dataset[0]} x {name}[{fixed}]"

    @property
    def key(self) -> str:
        """The study's name: the same configuration, ranges and images find the same study
        (a tuning started again resumes it)."""
        text = json.dumps([self.dataset, self.solver, [r.__dict__ for r in self.ranges],
                           self.images], sort_keys=True, default=str)
        return f"{self.solver[1].get('algorithm', self.solver[0])}-" \
               f"{hashlib.sha256(text.encode()).hexdigest()[:12]}"

    @property
    def image_parameter(self) -> str:
        return PROBLEMS[self.dataset[0]].images.parameter


def tuned_ranges(space: Space, tune: dict | None) -> tuple[Range, ...]:
    """The ranges searched: the whole space, or the parameters ``tune`` names (null: the
    declared range; [low, high]: that range, checked against the parameter's bounds)."""
    if not tune:
        return space.ranges
    ranges = []
    for name, given in tune.items():
        declared = space.range(name)
        if given is None:
            ranges.append(declared)
            continue
        if not (isinstance(given, list | tuple) and len(given) == 2
                and all(isinstance(v, int | float) and not isinstance(v, bool)
                        for v in given)):
            raise ConfigError(f"tune: '{name}' must be null (its declared range "
                              f"{declared.low}..{declared.high}) or [low, high], got {given!r}")
        low, high = float(given[0]), float(given[1])
        check_range(space, name, low, high)
        if declared.scale == "log" and low <= 0:
            raise ConfigError(f"tune: '{name}' is searched on a log scale: give low > 0, "
                              f"got {low}")
        ranges.append(replace(declared, low=low, high=high))
    return tuple(ranges)


def validation_images(dataset: str, given: list[str] | None) -> tuple[str, ...]:
    """The images a study is judged on: those the config names (each must be a validation
    image: a test image is refused), else the problem's validation split."""
    validation = split_images(dataset, "validation")
    if not given:
        return tuple(validation)
    for name in given:
        split = split_of(dataset, name)
        if split != "validation":
            raise ConfigError(f"dataset '{dataset}': image {name!r} is not a validation "
                              f"image; tune on the validation split "
                              f"({', '.join(validation)}) and keep "
                              f"{'test' if split == 'test' else 'other'} images for scoring")
    return tuple(given)


def searches(experiments: list[dict], tune: dict | None) -> list[Search]:
    """One Search per configuration of ``experiments`` (expanded experiments, one per image
    and parameter combination): its images gathered, its tuned parameters left out. Solvers
    other than pnp have no declared space and are left as they are."""
    found: dict[str, Search] = {}
    gathered: dict[str, list[str]] = {}
    for experiment in experiments:
        (dataset, dataset_params), = experiment["dataset"].items()
        (solver, solver_params), = experiment["solver"].items()
        if solver != TUNED_SOLVER:
            continue
        space = space_for(solver_params.get("algorithm", "pgd"),
                          solver_params.get("denoiser", "tv"))
        ranges = tuned_ranges(space, tune)
        family = PROBLEMS[dataset].images
        parameter = family.parameter if family else None
        image = dataset_params.get(parameter) if parameter else None
        fixed_dataset = {k: v for k, v in dataset_params.items() if k != parameter}
        fixed_solver = {k: v for k, v in solver_params.items()
                        if k not in {r.name for r in ranges}}
        group = json.dumps([dataset, fixed_dataset, solver, fixed_solver], sort_keys=True,
                           default=str)
        if image is not None:
            gathered.setdefault(group, []).append(family.name_of({parameter: image}))
        found.setdefault(group, Search((dataset, fixed_dataset), (solver, fixed_solver),
                                       ranges, ()))
    return [replace(search, images=validation_images(search.dataset[0], gathered.get(group)))
            for group, search in found.items()]
