"""Seconds of one rank's run, fitted to the timings the memory probes took (no run of its own).

run = start-up + set-up(unknowns) + operator norm(unknowns)
      + iterations x sum over the timed steps of step(count)
      + evaluations x evaluation(unknowns)

A step's count is the pixels of the denoiser's pass over the image for ``denoise`` (every
tile with its halo, on several ranks its share: a tiled DnCNN's step grows with the image
while its calls' pixels, which its memory grows with, stay one batch) and the unknowns for
every other step; a physics step on several
ranks is the rank's share of the operators (``operator_share``). Each term is chosen among
``CANDIDATES`` by how well, fitted to the other probes, it predicts each of the
``HELD_OUT`` largest probes: times change regime between small and large sizes (CPU caches,
the allocator), so no one law fits every step (the super-resolution gradient grew 130x for
64x the pixels out of cache, where a power law fitted below predicted 0.13x), and the law
that predicts the probes nearest the answer is the one to trust. The chosen law is then
fitted to every probe.

The probes cap the operator norm's applications (probe.NORM_APPLICATIONS, fewer where the
image is mapped) and, where the image is mapped, TV's inner iterations: a probe's norm is
scaled to the applications a run takes at its size (``NormApplications``: a norm not
converged at the cap runs on, and a larger image converges no sooner), its TV denoiser by
the inner iterations it skipped (probe.tv_scale). Probes whose operators ran with chunks cut
(calibration.workspace_points) are left out: their steps are not a run's. Communication is
not probed (a probe runs on one rank): a prediction on several ranks leaves it out and says
so.
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
# Terms besides the steps, in the order a run pays them.
SETUP, NORM, EVALUATION = "set-up", "operator norm", "evaluation"
DENOISE = "denoise"  # the step whose count is the denoiser's pixels
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

    def predict(self, count: float) -> float:
        return predict(self.kind, self.parameters, count)

    @property
    def largest_count(self) -> float:
        return max(count for count, _ in self.probes)

    def describe(self) -> str:
        """The law in words, e.g. '0.012 + 3.1e-07 x^1.10'."""
        if self.kind == "piecewise":
            return f"piecewise through {len(self.probes)} probes"
        constant, scale, power = self.parameters
        return f"{constant:.3g} + {scale:.3g} x^{power:.2f}"

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "parameters": list(self.parameters),
                "probes": [list(probe) for probe in self.probes],
                "held_out_error": self.held_out_error, "candidates": self.candidates,
                "law": self.describe()}


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
    ``CANDIDATES``; none scored: linear), fitted to every probe (at a repeated count, their
    median)."""
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


@dataclass(frozen=True)
class Counts:
    """What one rank's terms are functions of: the image's unknowns, the denoiser's pixels
    per call, and the rank's share of the operators (1 on one rank)."""

    unknowns: float
    denoised: float
    physics_share: float = 1.0

    def of(self, term: str) -> float:
        return self.denoised if term == DENOISE else self.unknowns


@dataclass(frozen=True)
class TimeModel:
    """The fitted terms of one configuration: its timed steps per iteration, its set-up,
    operator norm and evaluation, and the process start-up (the probes' median)."""

    steps: tuple[TermFit, ...]
    setup: TermFit
    norm: TermFit | None  # None: the solver computes no operator norm
    evaluation: TermFit
    startup_s: float

    def step_seconds(self, counts: Counts) -> dict[str, float]:
        """Each step's seconds per iteration on one rank with ``counts``."""
        return {fit.name: fit.predict(counts.of(fit.name))
                * (1.0 if fit.name == DENOISE else counts.physics_share) for fit in self.steps}

    def iteration_seconds(self, counts: Counts) -> float:
        return sum(self.step_seconds(counts).values())

    def setup_seconds(self, counts: Counts, norm: bool = True) -> float:
        """The set-up's seconds; ``norm``: the operator norm computed (a run whose norm is
        cached reads it instead)."""
        seconds = self.setup.predict(counts.unknowns)
        if norm and self.norm is not None:
            seconds += self.norm.predict(counts.unknowns) * counts.physics_share
        return seconds

    def run_seconds(self, counts: Counts, iterations: int, evaluations: int,
                    norm: bool = True) -> float:
        """One run: start-up, set-up, ``iterations`` iterations, ``evaluations`` evaluations."""
        return (self.startup_s + self.setup_seconds(counts, norm)
                + iterations * self.iteration_seconds(counts)
                + evaluations * self.evaluation.predict(counts.unknowns))

    def extrapolation(self, counts: Counts) -> float:
        """How many times the largest probed count each term is asked beyond (1: within the
        probes)."""
        terms = [*self.steps, self.setup, self.evaluation]
        return max(1.0, *(counts.of(fit.name) / fit.largest_count for fit in terms))

    def terms(self) -> list[TermFit]:
        return [*self.steps, self.setup, *([self.norm] if self.norm else []), self.evaluation]

    def to_json(self) -> dict:
        return {"terms": [fit.to_json() for fit in self.terms()],
                "startup_s": self.startup_s}


@dataclass(frozen=True)
class RunPrediction:
    """One run of an experiment as its configuration's time model predicts it (plan)."""

    startup_s: float
    setup_s: float  # without the operator norm
    norm_s: float  # the operator norm, computed (a run that finds it cached reads it)
    iteration_s: float
    evaluation_s: float
    iterations: int
    evaluations: int
    extrapolation: float  # model.TimeModel.extrapolation

    def run_s(self, norm: bool) -> float:
        """A run in a started process: set-up (``norm``: computing the norm), iterations and
        evaluations."""
        return (self.setup_s + self.norm_s * norm + self.iterations * self.iteration_s
                + self.evaluations * self.evaluation_s)

    def to_json(self) -> dict:
        return {**self.__dict__}


def run_prediction(model: TimeModel, counts: Counts, iterations: int,
                   evaluations_count: int) -> RunPrediction:
    """``model``'s run at ``counts`` of ``iterations`` iterations and evaluations."""
    norm = 0.0 if model.norm is None else model.norm.predict(counts.unknowns) * \
        counts.physics_share
    return RunPrediction(model.startup_s, model.setup_seconds(counts, norm=False), norm,
                         model.iteration_seconds(counts),
                         model.evaluation.predict(counts.unknowns), iterations,
                         evaluations_count, model.extrapolation(counts))


def duration_text(seconds: float) -> str:
    """Seconds as a line says them: two digits below 10 s, then s, min or h."""
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


def evaluations(max_iter: int, eval_every: int) -> int:
    """Evaluations of a run: the first iteration's, every ``eval_every``-th and the last
    (LoopSolver.get_next)."""
    return math.ceil(max_iter / max(eval_every, 1)) + 1


def timed(points) -> list:
    """The probes whose timings are a run's: timed, their chunks not cut."""
    return [point for point in points if point.timing and not point.timing.get("chunks_cut")]


@dataclass(frozen=True)
class NormApplications:
    """The applications a run's operator norm is predicted to take at a count of unknowns: a
    line in the logarithm of the unknowns through the probes whose norm converged within the
    probe's cap (Lanczos from a random start takes a few more as the image grows: radio 4,
    6, 7 and 8 from 32² to 128²), at most the limit a run stops at (the timings'
    ``norm_limit``); the limit where no probe's norm converged (super-resolution's Lanczos
    runs all 30)."""

    intercept: float
    slope: float  # applications per e-fold of unknowns, never negative
    limit: float | None  # None: probes timed before the limit was recorded

    def at(self, unknowns: float) -> float:
        count = self.intercept + self.slope * math.log(max(unknowns, 1.0))
        return count if self.limit is None else min(count, self.limit)


def norm_applications(points) -> NormApplications | None:
    """``NormApplications`` of the probes; None where no probe ran a norm, or none converged
    and no limit was recorded."""
    ran = [point for point in points if point.timing["norm_applications"] > 0]
    limits = [point.timing["norm_limit"] for point in ran if "norm_limit" in point.timing]
    limit = max(limits) if limits else None
    converged = [(math.log(point.unknowns), point.timing["norm_applications"]) for point in ran
                 if not point.timing["norm_capped"]]
    if not converged:
        return None if limit is None else NormApplications(limit, 0.0, limit)
    logs, counts = zip(*converged, strict=True)
    mean_log, mean_count = sum(logs) / len(logs), sum(counts) / len(counts)
    spread = sum((value - mean_log) ** 2 for value in logs)
    slope = 0.0 if spread == 0 else max(sum(
        (value - mean_log) * (count - mean_count)
        for value, count in converged) / spread, 0.0)
    return NormApplications(mean_count - slope * mean_log, slope, limit)


def norm_seconds(point, applications: NormApplications | None) -> float:
    """A probe's norm seconds as a run's: its own where its norm converged within the
    probe's cap; a capped one's scaled to the applications a run takes at its unknowns, no
    fewer than it ran (a norm not converged at the cap runs on: scaled to the 8 radio's
    small probes converged in, its set-up was predicted at 0.35 of the measured; to the
    limit, at 2.75)."""
    timing = point.timing
    ran = timing["norm_applications"]
    if not timing["norm_capped"] or not ran or applications is None:
        return timing["norm_s"]
    return timing["norm_s"] * max(applications.at(point.unknowns), ran) / ran


def time_model(points) -> TimeModel | None:
    """The time model of a calibration's probes (``CalibrationPoint`` with timings); None when
    fewer than two sizes were timed (a calibration made before runs were timed)."""
    from statistics import median

    used = timed(points)
    if len({point.unknowns for point in used}) < 2:
        return None
    applications = norm_applications(used)
    # The steps its own probes ran: a probe borrowed from another algorithm of its family
    # (calibration.shared_points) times that algorithm's steps, not necessarily these.
    own = [point for point in used if not point.shared_from] or used
    names = sorted({name for point in own for name in point.timing["steps"]})
    steps = tuple(fit_term(name, [(point_counts(p).of(name),
                                   step_time(p.timing, name)) for p in used
                                  if p.timing["steps"].get(name)]) for name in names)
    setup = fit_term(SETUP, [(p.unknowns, p.timing["setup_s"] - p.timing["norm_s"])
                             for p in used])
    norm = None if not any(p.timing["norm_s"] for p in used) else \
        fit_term(NORM, [(p.unknowns, norm_seconds(p, applications)) for p in used])
    evaluation = fit_term(EVALUATION, [(p.unknowns, p.timing["evaluation_s"]) for p in used])
    startup = median(p.timing.get("startup_s", 0.0) for p in used)
    return TimeModel(steps, setup, norm, evaluation, startup)


def point_counts(point) -> Counts:
    """A probe's counts: its unknowns and the pixels of its denoising pass (the timing's
    ``pass_pixels``, calibration.probe_point; a probe timed without them denoised its call's
    pixels once per step, as an untiled denoiser does)."""
    return Counts(point.unknowns, point.timing.get("pass_pixels", point.denoised))


def step_time(timing: dict, name: str) -> float:
    """A probe's seconds of step ``name`` per iteration: the least of its iterations' (the
    first builds what the loop keeps; on shared cores another process's burst lands in one
    iteration, not in both), a TV denoiser's scaled to a run's inner iterations."""
    seconds = min(timing["steps"][name])
    return seconds * timing.get("denoise_scale", 1.0) if name == DENOISE else seconds
