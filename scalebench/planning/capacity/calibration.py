"""Calibrating a configuration: probes at a few small sizes, the memory model fitted to them,
and the largest size the model predicts within a budget.

The search for a configuration's memory: which sizes to probe (each probe a short real run
in a fresh process, ``probe``), the workspace, regime and extension probes the fit needs,
then the largest fitting size over the valid ones. What is calibrated is a
``configuration.Configuration``; ``calibration_cache`` keeps each calibration made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from scalebench.planning.capacity.allocator import MMAP_THRESHOLD_MAX, glibc_host
from scalebench.planning.capacity.calibration_cache import (
    cache_path,
    cached_model,
    family_points,
    note_family_member,
    write_entry,
)
from scalebench.planning.capacity.configuration import (
    PROBE_ITERATIONS,
    Configuration,
    valid_at_most,
)
from scalebench.planning.capacity.model import CalibrationPoint, MemoryModel, fit
from scalebench.planning.capacity.probe import probe

# Default probed sizes: the largest, and three steps below it down to a quarter of it.
DEFAULT_LARGEST, PROBE_FRACTIONS = 128, (0.25, 0.5, 0.75, 1.0)
# Workspace probes cut an operator's chunk to this fraction of its workspace at the size.
WORKSPACE_CUT = 4
# The regime probe's feature map is this many times the threshold: clear of the crossing,
# where the network's smaller maps (deeper levels, temporaries) are still in the heap.
REGIME_MARGIN = 1.5
# A calibration none of whose phases grows beyond the probes' noise (model.fit_phase: radio's
# iterations below about 512, TV's below 128) is extended by a probe at twice the
# largest size, at most EXTENSIONS times (8x its side), until it grows by more.
EXTENSIONS = 3
# An answer keeps this fraction of what the budget leaves above the process's measured floor
# (MemoryModel.floor_bytes) free:
# a process's peak at one size varies from run to run (by up to 18 % of its size-dependent
# part near DnCNN's regime crossing, measured), so a size predicted exactly at the budget
# would exceed it about half the time.
HEADROOM = 0.2
# A configuration whose family (the same operator and denoiser under another algorithm) was
# calibrated whole probes this many of the largest sizes itself and borrows the rest: at the
# smaller sizes an algorithm's few image-sized iterates (256 KiB at 256²) are far below the
# probes' noise, and its own two probes give its steps two sizes and the memory law its
# growth where the algorithms differ most.
OWN_PROBES = 2


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
                            result.iterations_peak_bounded(configuration.device),
                            {**result.timing, "chunks_cut": chunk_elements is not None,
                             "pass_pixels": configuration.time_counts(size, 1).denoised})


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
    # The maps of the nearest valid size: the problem may refuse the size itself (super-
    # resolution: multiples of its factor).
    last_below = last_true(lambda size: configuration.feature_map_bytes(
        valid_at_most(configuration, size) or sizes[-1]) < target, sizes[-1], limit)
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
    family = family_points(configuration, sizes)
    model = own_calibration(configuration, sizes) if family is None else \
        fit(shared_points(configuration, family))
    model = replace(model, seconds=time.monotonic() - started)
    write_entry(cache_path(configuration, sizes), model.to_json())
    if family is None:
        note_family_member(configuration)
    return model, False


def own_calibration(configuration: Configuration, sizes: list[int]) -> MemoryModel:
    """The model of probes at ``sizes``, ``workspace_points``, ``regime_points``, and
    extension probes while it does not grow."""
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
    return model


def shared_points(configuration: Configuration, family: tuple[CalibrationPoint, ...]
                  ) -> list[CalibrationPoint]:
    """``family``'s probes (another algorithm's calibration) with those at its
    ``OWN_PROBES`` largest sizes probed again by ``configuration``; probes whose chunks
    were cut (``workspace_points``: the operator's, whatever the algorithm) kept."""
    whole = sorted({point.size for point in family
                    if point.workspace == configuration.workspace(point.size)})
    own_sizes = whole[-OWN_PROBES:]
    kept = [point for point in family if point.size not in own_sizes
            or point.workspace != configuration.workspace(point.size)]
    return [*kept, *(probe_point(configuration, size) for size in own_sizes)]


def usable_budget(model: MemoryModel, budget_bytes: float) -> float:
    """The peak an answer may predict within ``budget_bytes``: the process's measured floor
    (``MemoryModel.floor_bytes``) and all but ``HEADROOM`` of the rest."""
    floor = model.floor_bytes
    return floor + (1 - HEADROOM) * (budget_bytes - floor)


def largest_fitting(configuration: Configuration, model: MemoryModel, ranks: int,
                    budget_bytes: float, limit: int = 1 << 20) -> int | None:
    """The largest valid size whose predicted peak on one of ``ranks`` ranks is within
    ``budget_bytes`` (None when even the smallest valid size is not). The prediction grows
    with the size (non-negative terms), so ``last_true`` finds it, over the valid sizes at
    most each candidate."""
    return largest_valid(configuration, lambda size: model.predict(
        configuration.sizes(size, ranks, model)) <= budget_bytes, limit)


def largest_valid(configuration: Configuration, fits: Callable[[int], bool],
                  limit: int = 1 << 20) -> int | None:
    """The largest valid size that ``fits`` (a prediction within a budget, which once false
    stays false as the size grows), None when even the smallest valid size does not: over
    the valid sizes at most each candidate (``last_true``)."""
    def holds(size: int) -> bool:
        valid = valid_at_most(configuration, size)
        return valid is not None and fits(valid)

    smallest = next((size for size in range(1, 257) if configuration.valid(size)), None)
    if smallest is None or not holds(smallest):
        return None
    return valid_at_most(configuration, last_true(holds, smallest, limit))


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
