"""The laws a time term may follow, and the choice among them: a term's seconds as a function
of its count (unknowns, or a denoising pass's pixels), linear, a power law with a constant, or
straight lines in log-log through the probes; chosen by how well, fitted to the other probes,
each predicts the largest probes held out (``fit_term``). Where the probes span the host
allocator's two regimes, each regime has its own law (``regime_fit``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

CANDIDATES = ("linear", "power law + constant", "piecewise")
# Exponents tried by the power law (seconds = c + a * count ** p), a grid: a handful of
# probes cannot pin p more finely than their noise (5-20 % here). No step here grows faster
# than the unknowns squared (a CT projector with angles as the side: unknowns^1.5; out of
# cache, super-resolution's gradient grew as unknowns^1.17); a steeper fit is a noisy probe's.
POWERS = tuple(round(0.5 + 0.05 * k, 2) for k in range(31))  # 0.5 .. 2.0
# Each candidate is scored on the probes at this many largest counts, each held out in turn.
HELD_OUT = 2
# Below the mapped image (``regime_fit``), the heap probes' law is trusted up to this many
# times their largest count, as the refinement extrapolates memory from its half-answer
# probe; past it, to the knee, seconds follow a straight line in log-log to the mapped law
# there. CT's heap law fitted to 32²-256² (overheads, power 0.85) predicted its iteration at
# 818² 0.56x; radio's, fitted up to 1988², predicted 800² at 0.92.
HEAP_REACH = 4.0
# What a term measured at one count is called instead of a law (TermFit.one_probe).
ONE_PROBE = "one probe: not a fit"
# Seconds below this are the clock's resolution, not a duration: a term measured at 0 (a norm
# read from nothing, a step too short to time) is held here, so relative errors stay finite.
RESOLUTION_S = 1e-6


@dataclass(frozen=True)
class TermFit:
    """One term's seconds as a function of its count: the chosen law (``kind``), its
    parameters, the (count, seconds) probes it was fitted to and its error at the held-out
    probes (mean |predicted / measured - 1|; None where too few probes to hold one out)."""

    name: str
    kind: str
    parameters: tuple[float, ...]
    probes: tuple[tuple[float, float], ...]
    held_out_error: float | None
    candidates: dict  # each candidate's held-out error (None: not scored)
    # The law of the probes whose image was mapped (``regime_fit``), from ``knee`` (a count)
    # up; None: one law for every count.
    above: TermFit | None = None
    knee: float | None = None

    def predict(self, count: float) -> float:
        """Seconds at ``count``; with two regimes, never fewer at a larger count (each law
        rises, and the mapped one is held at least at the heap law's last value): the
        search for a time budget's answer (calibration.last_true) needs a rising time."""
        if self.above is None:
            return predict(self.kind, self.parameters, count)
        reach = min(HEAP_REACH * max(probe for probe, _ in self.probes), self.knee)
        if count <= reach:
            return predict(self.kind, self.parameters, count)
        low = predict(self.kind, self.parameters, reach)
        if count >= self.knee:
            return max(self.above.predict(count), low)
        high = max(self.above.predict(self.knee), low)
        share = math.log(count / reach) / math.log(self.knee / reach)
        return low * (high / low) ** share

    @property
    def largest_count(self) -> float:
        return max(count for count, _ in self.all_probes)

    @property
    def all_probes(self) -> tuple[tuple[float, float], ...]:
        return self.probes + (self.above.probes if self.above is not None else ())

    @property
    def one_probe(self) -> bool:
        """Whether the term was measured at one count only: its seconds there at every count,
        not a fit."""
        return len(self.all_probes) == 1

    def describe(self) -> str:
        """The law in words, e.g. '0.012 + 3.1e-07 x^1.10'; a term of one probe says that it
        is not a fit."""
        if self.one_probe:
            return f"{ONE_PROBE} ({self.probes[0][1]:.3g} s at every count)"
        if self.kind == "piecewise":
            law = f"piecewise through {len(self.probes)} probes"
        else:
            constant, scale, power = self.parameters
            law = f"{constant:.3g} + {scale:.3g} x^{power:.2f}"
        if self.above is None:
            return law
        return f"{law} below {self.knee:.3g}, {self.above.describe()} from it (image mapped)"

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "parameters": list(self.parameters),
                "probes": [list(probe) for probe in self.probes],
                "held_out_error": self.held_out_error, "candidates": self.candidates,
                "law": self.describe(), "one_probe": self.one_probe, "knee": self.knee,
                "above": None if self.above is None else self.above.to_json()}


def predict(kind: str, parameters: tuple[float, ...], count: float) -> float:
    """Seconds of law ``kind`` with ``parameters`` at ``count``."""
    if kind == "piecewise":
        return piecewise(parameters, count)
    constant, scale, power = parameters
    return constant + scale * count ** power


def piecewise(parameters: tuple[float, ...], count: float) -> float:
    """Straight lines in log-log through the probes (``parameters``: counts then seconds,
    sorted by count; a probe below a smaller one's seconds counts those); past either end,
    the end segment's slope from the end probe, past the largest no steeper than the power
    law's steepest (``POWERS``)."""
    half = len(parameters) // 2
    logs = [math.log(value) for value in parameters[:half]]
    # A time never falls as the size grows: each probe counts at least the smaller ones'.
    times = list(itertools.accumulate((math.log(max(value, 1e-12))
                                       for value in parameters[half:]), max))
    if half == 1:
        return parameters[1]
    target = math.log(max(count, 1e-12))
    index = 1
    while index < half - 1 and target > logs[index]:
        index += 1
    low, high = index - 1, index
    slope = max((times[high] - times[low]) / (logs[high] - logs[low]), 0.0)
    if target <= logs[high]:  # between the probes, or below the first: from the lower one
        return math.exp(times[low] + slope * (target - logs[low]))
    return math.exp(times[high] + min(slope, POWERS[-1]) * (target - logs[high]))


def fit_power(counts: list[float], seconds: list[float],
              powers: tuple[float, ...] = POWERS) -> tuple[float, float, float]:
    """(c, a, p) of seconds = c + a * count ** p, c and a non-negative, minimising the
    squared relative residuals (times span orders of magnitude: each probe counts alike),
    p the best of ``powers``."""
    import numpy as np
    from scipy.optimize import nnls

    x, t = np.array(counts, dtype=float), np.array(seconds, dtype=float)
    weight = 1.0 / np.maximum(t, 1e-9)
    best: tuple[float, tuple[float, float, float]] | None = None
    for power in powers:
        column = x ** power
        scale = column.max() or 1.0
        matrix = np.stack([np.ones_like(x), column / scale], axis=1) * weight[:, None]
        solution, residual = nnls(matrix, t * weight)
        if best is None or residual < best[0] - 1e-12:
            best = (residual, (float(solution[0]), float(solution[1] / scale), float(power)))
    return best[1]


def fit(kind: str, counts: list[float], seconds: list[float]) -> tuple[float, ...]:
    """The parameters of law ``kind`` fitted to the probes."""
    if kind == "power law + constant":
        return fit_power(counts, seconds)
    if kind == "linear":
        return fit_power(counts, seconds, (1.0,))
    ordered = sorted(zip(counts, seconds, strict=True))
    return tuple(count for count, _ in ordered) + tuple(value for _, value in ordered)


def fewest_probes(kind: str) -> int:
    """Distinct counts a law needs to be fitted: three parameters, two, or two points."""
    return 3 if kind == "power law + constant" else 2


def held_out_error(kind: str, probes: list[tuple[float, float]]) -> float | None:
    """Mean |predicted / measured - 1| of law ``kind`` at each of the ``HELD_OUT`` largest
    probes, fitted to the others; None when too few probes remain to fit it."""
    largest = sorted(probes)[-HELD_OUT:]
    errors = []
    for count, seconds in largest:
        rest = [probe for probe in probes if probe[0] != count]
        if len(rest) < fewest_probes(kind):
            return None
        parameters = fit(kind, *map(list, zip(*rest, strict=True)))
        errors.append(abs(predict(kind, parameters, count) / seconds - 1))
    return sum(errors) / len(errors)


def fit_term(name: str, probes: list[tuple[float, float]]) -> TermFit:
    """The term's law chosen by ``held_out_error`` (ties: the earlier, simpler, of
    ``CANDIDATES``; none scored: linear, or with one count probed its seconds at every
    count), fitted to every probe (at a repeated count, their median)."""
    merged = merged_probes(probes)
    scores = {kind: held_out_error(kind, merged) for kind in CANDIDATES}
    scored = {kind: error for kind, error in scores.items() if error is not None}
    if scored:
        kind = min(scored, key=lambda k: (round(scored[k], 9), CANDIDATES.index(k)))
    else:
        kind = "linear" if len(merged) >= 2 else "piecewise"
    parameters = fit(kind, *map(list, zip(*merged, strict=True)))
    return TermFit(name, kind, parameters, tuple(merged), scores.get(kind), scores)


def merged_probes(probes: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """One (count, seconds) per count, the median of its probes' (at least
    ``RESOLUTION_S``), sorted by count."""
    from statistics import median

    by_count: dict[float, list[float]] = {}
    for count, seconds in probes:
        by_count.setdefault(float(count), []).append(float(seconds))
    return [(count, max(median(values), RESOLUTION_S))
            for count, values in sorted(by_count.items())]


def regime_fit(name: str, probes: list[tuple[float, float, float, bool]],
               knee_unknowns: float) -> TermFit:
    """The term of ``probes`` (count, seconds, unknowns, whether the image was mapped). Where
    two counts or more were probed in each of the host allocator's regimes, the heap probes'
    law below the knee and the mapped probes' from it: a mapped image's arrays are mapped
    afresh at each allocation, and their page faults cost per pixel what the heap does not
    (radio's TV: 0.5 us per pixel at 512², 2.4 at 3038² and at 4764²; one law through both
    predicted 1.35x at 780²). The knee is ``knee_unknowns`` (allocator.mapped_values) in the
    term's count, interpolated in log-log between the two regimes' nearest probes."""
    heap = [probe for probe in probes if not probe[3]]
    mapped = [probe for probe in probes if probe[3]]
    if len({probe[0] for probe in heap}) < 2 or len({probe[0] for probe in mapped}) < 2:
        return fit_term(name, [(count, seconds) for count, seconds, _, _ in probes])
    below = fit_term(name, [(count, seconds) for count, seconds, _, _ in heap])
    above = fit_term(name, [(count, seconds) for count, seconds, _, _ in mapped])
    last = max(heap, key=lambda probe: probe[2])
    first = min(mapped, key=lambda probe: probe[2])
    exponent = math.log(first[0] / last[0]) / math.log(first[2] / last[2]) \
        if first[2] != last[2] else 1.0
    knee = last[0] * (knee_unknowns / last[2]) ** exponent
    return TermFit(name, below.kind, below.parameters, below.probes, below.held_out_error,
                   below.candidates, above, knee)
