"""Calibrations: probes of one configuration at a few small sizes, the model fitted to them,
cached by what determines them.

A configuration is an experiment of the inference benchmark with its size parameter left out.
Its calibration is cached under ``<scalebench cache>/capacity/<key>.json``; the key covers the
configuration, the size parameter and the probed sizes, the device type, the number of probe
iterations, the code (commit and uncommitted changes) and the numerical packages, so that a
change to any of them calibrates again.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from scalebench.data.cache import cache_root
from scalebench.errors import ConfigError
from scalebench.experiment.capacity.allocator import FLOAT32_BYTES, MMAP_THRESHOLD_MAX, glibc_host
from scalebench.experiment.capacity.model import (
    CalibrationPoint,
    MemoryModel,
    Sizes,
    fit,
    operator_share,
)
from scalebench.experiment.capacity.probe import probe
from scalebench.rank.devices import device_type

# Probe iterations: the first builds what the loop keeps, the second shows it does not grow.
PROBE_ITERATIONS = 2
# Default probed sizes: the largest, and three steps below it down to a quarter of it.
DEFAULT_LARGEST, PROBE_FRACTIONS = 128, (0.25, 0.5, 0.75, 1.0)
# Workspace probes cut an operator's chunk to this fraction of its workspace at the size.
WORKSPACE_CUT = 4
# Solver parameters that change no rank's peak (the probes run two iterations; the ranks are
# the model's): calibrations are shared across them.
NOT_MEMORY = ("max_iter", "eval_every")
# The regime probe's feature map is this many times the threshold: clear of the crossing,
# where the network's smaller maps (deeper levels, temporaries) are still in the heap.
REGIME_MARGIN = 1.5
# A calibration none of whose phases grows beyond the probes' noise (model.fit_phase: radio's
# iterations below about 512, TV's below 128) is extended by a probe at twice the
# largest size, at most EXTENSIONS times (8x its side), until it grows by more.
EXTENSIONS = 3
# An answer keeps this fraction of what the budget leaves above the process baseline free:
# a process's peak at one size varies from run to run (by up to 18 % of its size-dependent
# part near DnCNN's regime crossing, measured), so a size predicted exactly at the budget
# would exceed it about half the time.
HEADROOM = 0.2
# Provenance fields (provenance.collect) that decide a calibration besides the configuration.
ENVIRONMENT = ("code_commit", "code_diff_sha256", "torch", "deepinv", "numpy", "astra")


@dataclass(frozen=True)
class Configuration:
    """An inference experiment whose ``size_parameter`` varies: its dataset and solver with
    their given parameters (the size among them or not) and the device it runs on."""

    dataset: str
    dataset_params: dict
    solver: str
    solver_params: dict
    size_parameter: str

    def at(self, size: int) -> Configuration:
        return replace(self, dataset_params={**self.dataset_params,
                                             self.size_parameter: size})

    @property
    def device(self) -> str:
        """The device type the runs take ('auto': CUDA where there is one)."""
        return device_type(self.resolved_solver()["device"])

    def key_record(self) -> dict:
        """What identifies the configuration: every parameter resolved (defaults filled, the
        device by its type), the size left out."""
        dataset = self.resolved_dataset()
        dataset.pop(self.size_parameter)
        return {"dataset": self.dataset, "solver": self.solver,
                "size_parameter": self.size_parameter, "dataset_params": dataset,
                "solver_params": {**{key: value for key, value in self.resolved_solver().items()
                                     if key not in NOT_MEMORY and not key.startswith("slurm_")},
                                  "device": self.device}}

    def without_size(self) -> dict:
        return {"dataset": self.dataset, "solver": self.solver,
                "size_parameter": self.size_parameter,
                "dataset_params": {key: value for key, value in self.dataset_params.items()
                                   if key != self.size_parameter},
                "solver_params": self.solver_params}

    def resolved_dataset(self) -> dict:
        from scalebench.param_spec import resolved_parameters
        from scalebench.problems import PROBLEMS

        return resolved_parameters(self.dataset_params, PROBLEMS[self.dataset].params)

    @property
    def spec(self):
        """The solver's registered spec (scalebench.loops.SOLVERS)."""
        from scalebench.loops import SOLVERS

        return SOLVERS[self.solver]

    def resolved_solver(self) -> dict:
        from scalebench.loops import SOLVERS
        from scalebench.param_spec import resolved_parameters

        return resolved_parameters(self.solver_params, SOLVERS[self.solver].params)

    def valid(self, size: int) -> bool:
        """Whether the problem accepts ``size`` for the size parameter, and the denoiser the
        image it makes (DRUNet: sides a multiple of 8)."""
        from scalebench.denoisers.tiles import check_denoiser_fits
        from scalebench.param_spec import validate_parameters
        from scalebench.problems import PROBLEMS

        spec, sized = PROBLEMS[self.dataset], self.at(size)
        try:
            validate_parameters(f"dataset '{self.dataset}'", sized.dataset_params, spec.params)
            check_denoiser_fits(self.resolved_solver(),
                                spec.image_shape(**sized.resolved_dataset()))
        except (ConfigError, ValueError):
            return False
        return True

    def sizes(self, size: int, ranks: int, model: MemoryModel | None) -> Sizes:
        """The term counts of one of ``ranks`` ranks at ``size`` (measurements by the model's
        law; without a model, none)."""
        from scalebench.denoisers.tiles import denoised_pixels
        from scalebench.problems import PROBLEMS

        spec, values = PROBLEMS[self.dataset], self.at(size).resolved_dataset()
        shape = spec.image_shape(**values)
        solver = self.resolved_solver()
        measurements = 0.0
        if model is not None and self.spec.uses_operator:
            share = operator_share(spec.num_operators(**values), ranks,
                                   solver["distribute_physics"])
            measurements = model.measurements(size) * share
        return Sizes(math.prod(shape), measurements, denoised_pixels(solver, shape, ranks),
                     self.workspace(size))

    @cached_property
    def feature_channels(self) -> int:
        """Channels of the denoiser's full-resolution feature maps with the weights it runs
        (0: TV, which has none)."""
        from scalebench.denoisers.catalog import feature_channels, resolve_weights
        from scalebench.problems import PROBLEMS

        solver = self.resolved_solver()
        if not self.spec.uses_denoiser:
            return 0
        channels = PROBLEMS[self.dataset].image_shape(**self.resolved_dataset())[0]
        weights = resolve_weights(solver["denoiser"], channels, solver["pretrained"])
        return feature_channels(solver["denoiser"], weights.widths)

    def feature_map_bytes(self, size: int) -> int:
        """Bytes of one full-resolution feature map of a denoiser call at ``size`` on one rank
        (the image, or its batch of tiles); 0 for TV."""
        from scalebench.denoisers.tiles import denoised_pixels
        from scalebench.problems import PROBLEMS

        if self.feature_channels == 0:
            return 0
        shape = PROBLEMS[self.dataset].image_shape(**self.at(size).resolved_dataset())
        return FLOAT32_BYTES * self.feature_channels * \
            denoised_pixels(self.resolved_solver(), shape, 1)

    def workspace(self, size: int, chunk_elements: int | None = None) -> int:
        """Elements of an operator's largest chunk at ``size`` (0: no chunked operator; the
        denoiser solver builds none)."""
        from scalebench.problems import PROBLEMS

        if not self.spec.uses_operator:
            return 0
        return PROBLEMS[self.dataset].workspace(self.at(size).resolved_dataset(),
                                                chunk_elements)


def probe_sizes(configuration: Configuration, largest: int = DEFAULT_LARGEST) -> list[int]:
    """Four sizes from a quarter of ``largest`` up to it, each the nearest valid size below."""
    sizes = []
    for fraction in PROBE_FRACTIONS:
        size = max(int(largest * fraction), 1)
        while size > 0 and not configuration.valid(size):
            size -= 1
        if size > 0 and size not in sizes:
            sizes.append(size)
    return sizes


def configuration_key(configuration: Configuration) -> str:
    """The configuration and what else decides its calibration, the probed sizes aside."""
    from provenance import canonical_json, collect

    environment = collect()
    record = {"configuration": configuration.key_record(), "iterations": PROBE_ITERATIONS,
              "environment": {field: environment.get(field) for field in ENVIRONMENT}}
    return hashlib.sha256(canonical_json(record).encode()).hexdigest()[:24]


def cache_path(configuration: Configuration, sizes: list[int], variant: str = "") -> Path:
    """``capacity/<configuration key>/<sizes><variant>.json`` in the scalebench cache; the
    first calibration has no ``variant``, a refined one names what it was refined for
    (refine.refined_path)."""
    return cache_root() / "capacity" / configuration_key(configuration) / \
        f"{'-'.join(map(str, sorted(sizes)))}{variant}.json"


def read_entry(path: Path) -> tuple[MemoryModel, dict] | None:
    """A cache entry's model and its whole record (a refined one also holds its rounds);
    None when it cannot be read."""
    try:
        record = json.loads(path.read_text())
        return MemoryModel.from_json(record), record
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_entry(path: Path, record: dict) -> None:
    """``record`` at ``path``, whole or not at all (a parallel reader sees the old entry or
    the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record))
    partial.replace(path)


def cached_model(configuration: Configuration, sizes: list[int] | None = None
                 ) -> MemoryModel | None:
    """The cached calibration of ``configuration`` at ``sizes`` (None: of every cached one,
    the one whose probes reach the largest size, a refined one among them), None when there
    is none. An unreadable entry counts as none."""
    if sizes is not None:
        entry = read_entry(cache_path(configuration, sizes))
        return None if entry is None else entry[0]
    folder = cache_root() / "capacity" / configuration_key(configuration)
    models = [entry[0] for entry in map(read_entry, sorted(folder.glob("*.json")))
              if entry is not None]
    if not models:
        return None
    return max(models, key=lambda model: max((point.size for point in model.points),
                                             default=0))


def calibrated_peak(dataset: str, dataset_params: dict, solver: str, solver_params: dict,
                    ranks: int, size_parameter: str = "image_size") -> float | None:
    """One rank's peak as the cached calibration of this configuration predicts it; None
    without a calibration (``scalebench capacity`` makes them)."""
    from scalebench.problems import PROBLEMS

    if size_parameter not in PROBLEMS[dataset].params:
        return None
    configuration = Configuration(dataset, dataset_params, solver, solver_params,
                                  size_parameter)
    model = cached_model(configuration)
    if model is None:
        return None
    size = configuration.resolved_dataset()[size_parameter]
    return model.predict(configuration.sizes(size, ranks, model))


def probe_point(configuration: Configuration, size: int,
                chunk_elements: int | None = None, whole: bool = False) -> CalibrationPoint:
    """One probe of ``configuration`` at ``size`` on one rank (chunked operators with chunks
    of at most ``chunk_elements``; None: their own limit); ``whole``: as a run repeats its
    steps, none cut (probe.run_probe), to verify an answer."""
    sized = configuration.at(size)
    one_rank = {key: value for key, value in sized.solver_params.items()
                if not key.startswith("slurm_")}
    result = probe(sized.dataset, sized.dataset_params, sized.solver, one_rank,
                   PROBE_ITERATIONS, chunk_elements=chunk_elements, whole=whole)
    counts = configuration.sizes(size, 1, None)
    return CalibrationPoint(size, result.unknowns, result.measurements, counts.denoised,
                            result.peaks_bytes(configuration.device),
                            configuration.workspace(size, chunk_elements),
                            result.iterations_peak_bounded(configuration.device))


def workspace_points(configuration: Configuration, sizes: list[int]) -> list[CalibrationPoint]:
    """Probes at the two largest ``sizes`` with chunks cut to a quarter of their workspace.
    Below the chunk limit an operator's workspace grows like the unknowns, so probes at the
    default limit alone cannot tell the two terms apart; above it the workspace stops
    growing, and a prediction there needs each term's own bytes. None without workspace."""
    if configuration.workspace(sizes[-1]) == 0:
        return []
    return [probe_point(configuration, size, max(configuration.workspace(size) // WORKSPACE_CUT,
                                                 1))
            for size in sizes[-2:]]


def regime_size(configuration: Configuration, sizes: list[int],
                limit: int = 1 << 16) -> int | None:
    """The smallest valid size above ``sizes`` whose feature maps are ``REGIME_MARGIN`` times
    glibc's mmap threshold, when the configuration runs a network on the CPU under glibc and
    no probe at ``sizes`` reaches that; None otherwise (no network, CUDA, tiles that keep
    the maps below it at every size, or a probe already there)."""
    target = REGIME_MARGIN * MMAP_THRESHOLD_MAX
    if not glibc_host(configuration.device) or \
            configuration.feature_map_bytes(sizes[-1]) >= target:
        return None
    last_below = last_true(lambda size: configuration.feature_map_bytes(size) < target,
                           sizes[-1], limit)
    if last_below >= limit:
        return None
    return next((size for size in range(last_below + 1, last_below + 257)
                 if configuration.valid(size)), None)


def regime_points(configuration: Configuration, sizes: list[int]) -> list[CalibrationPoint]:
    """A probe at ``regime_size`` (none without one): sizes above the calibration's are
    predicted in the regime where the maps are mapped, so one probe has to be there."""
    size = regime_size(configuration, sizes)
    return [] if size is None else [probe_point(configuration, size)]


def calibrate(configuration: Configuration, sizes: list[int]) -> tuple[MemoryModel, bool]:
    """The model of ``configuration`` fitted to probes at ``sizes`` (and ``workspace_points``,
    ``regime_points``, and extension probes while it does not grow), and whether it came
    from the cache (else it is probed now and cached)."""
    model = cached_model(configuration, sizes)
    if model is not None:
        return model, True
    started = time.monotonic()
    points = [*(probe_point(configuration, size) for size in sizes),
              *workspace_points(configuration, sizes), *regime_points(configuration, sizes)]
    model = fit(points)
    largest = max(point.size for point in points)
    for _ in range(EXTENSIONS):
        if model.grows:
            break
        larger = valid_at_most(configuration, 2 * largest)
        if larger is None or larger <= largest:
            break
        largest = larger
        points.append(probe_point(configuration, largest))
        model = fit(points)
    model = replace(model, seconds=time.monotonic() - started)
    write_entry(cache_path(configuration, sizes), model.to_json())
    return model, False


def usable_budget(model: MemoryModel, budget_bytes: float) -> float:
    """The peak an answer may predict within ``budget_bytes``: the baseline and all but
    ``HEADROOM`` of the rest."""
    return model.baseline_bytes + (1 - HEADROOM) * (budget_bytes - model.baseline_bytes)


def valid_at_most(configuration: Configuration, size: int, search: int = 256) -> int | None:
    """The largest valid size <= ``size`` (within ``search`` steps), None when there is none."""
    for candidate in range(size, max(size - search, 0), -1):
        if configuration.valid(candidate):
            return candidate
    return None


def largest_fitting(configuration: Configuration, model: MemoryModel, ranks: int,
                    budget_bytes: float, limit: int = 1 << 20) -> int | None:
    """The largest valid size whose predicted peak on one of ``ranks`` ranks is within
    ``budget_bytes`` (None when even the smallest valid size is not). The prediction grows
    with the size (non-negative terms), so ``last_true`` finds it, over the valid sizes at
    most each candidate."""
    def fits(size: int) -> bool:
        valid = valid_at_most(configuration, size)
        return valid is not None and \
            model.predict(configuration.sizes(valid, ranks, model)) <= budget_bytes

    smallest = next((size for size in range(1, 257) if configuration.valid(size)), None)
    if smallest is None or not fits(smallest):
        return None
    return valid_at_most(configuration, last_true(fits, smallest, limit))


def last_true(holds: Callable[[int], bool], low: int, limit: int) -> int:
    """The largest n in [low, limit] for which ``holds``, given that it holds at ``low`` and,
    once false, stays false as n grows: a doubling from ``low``, then a bisection."""
    high = low
    while high < limit and holds(min(high * 2, limit)):
        high = min(high * 2, limit)
    above = min(high * 2, limit)
    while above - high > 1:
        middle = (high + above) // 2
        if holds(middle):
            high = middle
        else:
            above = middle
    return high
