"""Refinement: probes near the answer itself, until the model predicts them.

The first calibration probes sizes 15-240x smaller in unknowns than the answers a budget of a
few GiB gives, and the peak per unknown changes in between: glibc's allocator keeps freed
blocks below its mmap threshold in the heap and maps larger ones on their own, so the small
probes' bytes per unknown overstate the large sizes' (super-resolution with DnCNN at 4 GiB:
1968 predicted 3.44 GiB, measured 1.88 GiB; CT at 3 GiB: 1.39x). So after the first fit the
calibration probes at a quarter and at half of the answer's unknowns (``FRACTIONS``; each
within the budget and what this machine can hold, in fresh processes on one rank as every
probe), refits with the probes weighted by their unknowns (model.unknowns_weights), answers
again, and repeats while the model of the round before mispredicts the round's largest
probe by more than ``TOLERANCE`` or the refit moved the answer far past that probe
(``near_answer``): once it predicts a probe at half the answer's unknowns,
the answer is an extrapolation by 2x in unknowns within one regime, not by 15-240x across
two. The image's own arrays change regime too (``mapped_size``): where the answer's are
mapped, the probes are taken where they are, and the refinement probes whose images are
still in the heap count for nothing in the refit (``heap_regime_probes``).

A refined calibration is cached beside the first one (``refined_path``), keyed also by the
budget and the rank count it was refined for: the answer, hence the probes, depend on both.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from scalebench.planning.capacity import calibration
from scalebench.planning.capacity.allocator import glibc_host, mapped_values
from scalebench.planning.capacity.calibration import (
    calibrate,
    largest_fitting,
    last_true,
    usable_budget,
)
from scalebench.planning.capacity.calibration_cache import cache_path, read_entry, write_entry
from scalebench.planning.capacity.configuration import Configuration, valid_at_most
from scalebench.planning.capacity.model import CalibrationPoint, MemoryModel, fit

# Each round probes at these fractions of the answer's unknowns: near enough that the answer
# is a short extrapolation, far enough below it that a probe fits whatever the error.
FRACTIONS = (0.25, 0.5)
# A round whose largest probe the previous model predicted within this is the last.
TOLERANCE = 0.10
# Rounds at most (each one or two probes): super-resolution with DnCNN at 4 GiB settled in
# the third (tools/capacity_check.py, docs/performance.md); a fourth bounds the time of
# peaks no line predicts.
MAX_ROUNDS = 4
# A planned probe whose unknowns are within this fraction of an existing probe's is that
# probe: the fit learns nothing new from it, and a repeated size means the answer settled.
DISTINCT = 0.15
# A round's probes have at most this many times the unknowns of the largest probe before it,
# whatever the answer: a first calibration whose peaks barely grow cannot tell the terms
# apart (CT at 32-256: 16 MiB of growth, fitted per measured value, not per unknown), and
# its answer, 11000x the probes' unknowns, planned a first probe at 13593 that took 6 GiB of a
# 3 GiB budget. The rounds that settled probed 15-85x past the round before.
GROWTH = 128
# Probes are predicted to take at most this share of the memory this machine has available
# (host or device): a budget for a larger node is refined as far as this machine allows.
MACHINE_SHARE = 0.8
# A verified answer whose run exceeded its memory budget joins the refinement as one more
# round and the answer is made and verified again, at most this many times: a refined model
# mispredicts its answer by a few percent either way (TV denoising at 600 MiB above its
# baseline: 0.92 to 1.02, the run's peak 31 MiB over the budget once under a loaded test suite).
OVERRUN_ROUNDS = 2


@dataclass(frozen=True)
class Round:
    """One refinement round: the sizes it probed, and at its largest probe the peak the
    model before the round predicted and the one measured. An ``overrun`` round is a
    verified answer's whole run that exceeded the budget (``with_overrun``), not a planned
    probe: its peak is over the budget by definition."""

    sizes: list[int]
    newest: int
    predicted_bytes: float
    measured_bytes: int
    overrun: bool = False

    @property
    def ratio(self) -> float:
        return self.predicted_bytes / self.measured_bytes

    @property
    def settled(self) -> bool:
        """Whether the model before the round predicted its largest probe within
        ``TOLERANCE``."""
        return abs(self.ratio - 1) <= TOLERANCE

    def to_json(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}

    @classmethod
    def from_json(cls, data: dict) -> Round:
        return cls(list(data["sizes"]), data["newest"], data["predicted_bytes"],
                   data["measured_bytes"], data.get("overrun", False))


@dataclass(frozen=True)
class Refined:
    """A calibration refined near its answer, its rounds (none: the first calibration's
    probes were already near it, or nothing fits), and whether it came from the cache."""

    model: MemoryModel
    rounds: list[Round]
    cached: bool


def unknowns(configuration: Configuration, size: int) -> int:
    return configuration.sizes(size, 1, None).unknowns


def size_with_unknowns(configuration: Configuration, target: float, below: int) -> int | None:
    """The largest valid size below ``below`` with at most ``target`` unknowns (None: even
    the smallest valid size has more). Unknowns never fall as the size grows."""
    def holds(size: int) -> bool:
        valid = valid_at_most(configuration, size)
        return valid is not None and unknowns(configuration, valid) <= target

    smallest = next((size for size in range(1, 257) if configuration.valid(size)), None)
    if smallest is None or smallest >= below or not holds(smallest):
        return None
    return valid_at_most(configuration, last_true(holds, smallest, below - 1))


def machine_bytes(device: str) -> int | None:
    """Memory this machine has for a probe on ``device``: the host's available memory
    (MemAvailable), a CUDA device's total; None when unknown."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_properties(0).total_memory
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def mapped_size(configuration: Configuration) -> int | None:
    """The smallest valid size whose image (float32, every channel) is ``IMAGE_MARGIN`` times
    glibc's largest mmap threshold, for a run on the CPU under glibc; None elsewhere (CUDA,
    another allocator) or when none is below 2^16."""
    if not glibc_host(configuration.device):
        return None
    below = size_with_unknowns(configuration, mapped_values(), 1 << 16)
    start = 1 if below is None else below + 1
    return next((size for size in range(start, start + 256) if configuration.valid(size)),
                None)


def heap_regime_probes(configuration: Configuration, points: list[CalibrationPoint],
                       first: int) -> frozenset[int]:
    """The sizes of the refinement probes (``points`` after the ``first`` ones) whose
    images are below ``mapped_size``, when another refinement probe's are at or above it:
    their bytes per unknown are the heap's, not those of the answer's regime. Empty when no
    refinement probe is mapped."""
    mapped = mapped_size(configuration)
    if mapped is None:
        return frozenset()
    limit = unknowns(configuration, mapped)
    refinement = points[first:]
    if not any(point.unknowns >= limit for point in refinement):
        return frozenset()
    return frozenset(point.size for point in refinement if point.unknowns < limit)


def next_sizes(configuration: Configuration, model: MemoryModel, ranks: int,
               budget_bytes: float, machine: int | None) -> list[int]:
    """The sizes a round probes: ``FRACTIONS`` of the unknowns of the answer for ``ranks``
    ranks within ``budget_bytes``, each at most the largest size one rank (a probe holds
    every operator) is predicted to run within the budget and ``MACHINE_SHARE`` of
    ``machine``, and ``GROWTH`` times the largest probe's unknowns, and none within
    ``DISTINCT`` of a probed size's unknowns. Empty when nothing fits or every such size is
    probed."""
    if not model.grows:  # every size "fits" a flat model: there is no answer to refine
        return []
    usable = usable_budget(model, budget_bytes)
    answer = largest_fitting(configuration, model, ranks, usable)
    if answer is None:
        return []
    limit = usable if machine is None else min(usable, MACHINE_SHARE * machine)
    one_rank = largest_fitting(configuration, model, 1, limit)
    if one_rank is None:
        return []
    probed = [point.unknowns for point in model.points]
    grown = size_with_unknowns(configuration, GROWTH * max(probed), answer + 1)
    reach = one_rank if grown is None else min(one_rank, grown)
    planned: list[int] = []
    for fraction in FRACTIONS:
        size = size_with_unknowns(configuration, fraction * unknowns(configuration, answer),
                                  answer)
        if size is not None and min(size, reach) not in planned:
            planned.append(min(size, reach))
    if not planned:
        return []
    # An answer whose image is mapped is predicted from probes whose images are mapped too
    # (heap_regime_probes): the planned sizes below mapped_size are raised to it, past
    # GROWTH if need be (an image of a few times glibc's threshold, not the answer's size).
    mapped = mapped_size(configuration)
    if mapped is not None and mapped <= min(answer, one_rank):
        planned = sorted({max(size, mapped) for size in planned})
    largest = unknowns(configuration, planned[-1])
    sizes: list[int] = []
    for size in planned:
        count = unknowns(configuration, size)
        if any(abs(count - other) <= DISTINCT * other for other in probed):
            continue
        # Below the round's largest size, a probe already made between this one and the
        # largest gives the fit its second point near the answer: CT at 3 GiB, whose round
        # after 1523 and 2153 planned 1800 and 2546, spent 188 s of its calibration on 1800.
        if size != planned[-1] and any((1 - DISTINCT) * count <= other < (1 - DISTINCT) * largest
                                       for other in probed):
            continue
        sizes.append(size)
    return sorted(sizes)


def refine(configuration: Configuration, model: MemoryModel, ranks: int, budget_bytes: float,
           machine: int | None) -> tuple[MemoryModel, list[Round]]:
    """``model`` refined by rounds of probes (``next_sizes``), refitted weighted by unknowns,
    until a round's largest probe was predicted within ``TOLERANCE``, no new size is left
    to probe, or ``MAX_ROUNDS`` rounds."""
    points: list[CalibrationPoint] = list(model.points)
    first = len(points)
    rounds: list[Round] = []
    for _ in range(MAX_ROUNDS):
        sizes = next_sizes(configuration, model, ranks, budget_bytes, machine)
        if not sizes:
            break
        probed = [calibration.probe_point(configuration, size) for size in sizes]
        newest = probed[-1]
        rounds.append(Round(sizes, newest.size, model.predict(newest.sizes),
                            newest.peak_bytes))
        points += probed
        model = replace(fit(points, weighted=True,
                            ignored=heap_regime_probes(configuration, points, first)),
                        seconds=model.seconds)
        # A round predicted within the tolerance ends the refinement only if the refit's
        # answer stays near its probes: CT at 3 GiB was predicted at 2182 to 1.074, and the
        # refit moved its answer to 2.7x that probe's unknowns, where its peak stops growing
        # (1.58x high, docs/performance.md).
        if rounds[-1].settled and near_answer(configuration, model, ranks, budget_bytes):
            break
    return model, rounds


def near_answer(configuration: Configuration, model: MemoryModel, ranks: int,
                budget_bytes: float) -> bool:
    """Whether the largest probe has the unknowns of a probe at ``FRACTIONS[-1]`` of the
    answer's, within ``DISTINCT`` (as ``next_sizes`` counts a size probed); True when
    nothing fits (nothing to come nearer to)."""
    answer = largest_fitting(configuration, model, ranks, usable_budget(model, budget_bytes))
    if answer is None:
        return True
    largest = max(point.unknowns for point in model.points)
    return largest >= (1 - DISTINCT) * FRACTIONS[-1] * unknowns(configuration, answer)


def with_overrun(configuration: Configuration, sizes: list[int], ranks: int,
                 budget_bytes: int, done: Refined, run: CalibrationPoint) -> Refined:
    """``done`` with ``run``, a verification whose peak exceeded ``budget_bytes``, as one
    more round: refitted weighted by unknowns as every round, the model predicts near the
    answer what the run measured there, and its answer moves down. Cached in place of the
    refined entry, so that the command asked again answers from the corrected model."""
    model = done.model
    rounds = [*done.rounds, Round([run.size], run.size, model.predict(run.sizes),
                                  run.peak_bytes, overrun=True)]
    points = [*model.points, run]
    first = len(points) - sum(len(item.sizes) for item in rounds)
    model = replace(fit(points, weighted=True,
                        ignored=heap_regime_probes(configuration, points, first)),
                    seconds=model.seconds)
    write_entry(refined_path(configuration, sizes, ranks, budget_bytes),
                {**model.to_json(), "rounds": [item.to_json() for item in rounds]})
    return Refined(model, rounds, False)


def refined_path(configuration: Configuration, sizes: list[int], ranks: int,
                 budget_bytes: int) -> Path:
    """The refined calibration's cache entry: the first one's, with what it was refined for."""
    return cache_path(configuration, sizes, f".refined-{budget_bytes}B-{ranks}r")


def refined(configuration: Configuration, sizes: list[int], ranks: int,
            budget_bytes: int) -> Refined:
    """The calibration of ``configuration`` at ``sizes`` (calibration.calibrate, cached as
    always) refined near its answer for ``ranks`` ranks within ``budget_bytes``; cached, its
    ``seconds`` the first calibration's and the refinement's together."""
    path = refined_path(configuration, sizes, ranks, budget_bytes)
    entry = read_entry(path)
    if entry is not None:
        model, record = entry
        return Refined(model, [Round.from_json(item) for item in record.get("rounds", [])],
                       True)
    first, _ = calibrate(configuration, sizes)
    started = time.monotonic()
    model, rounds = refine(configuration, first, ranks, budget_bytes,
                           machine_bytes(configuration.device))
    if rounds:
        model = replace(model, seconds=first.seconds + time.monotonic() - started)
    write_entry(path, {**model.to_json(), "rounds": [item.to_json() for item in rounds]})
    return Refined(model, rounds, False)
