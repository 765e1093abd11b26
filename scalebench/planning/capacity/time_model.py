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

import math
from dataclasses import dataclass
from statistics import linear_regression, mean, median

from scalebench.planning.capacity.allocator import mapped_values
from scalebench.planning.capacity.time_laws import TermFit, regime_fit

# Terms besides the steps, in the order a run pays them.
SETUP, NORM, EVALUATION = "set-up", "operator norm", "evaluation"
DENOISE = "denoise"  # the step whose count is its pass's pixels


@dataclass(frozen=True)
class Counts:
    """What one rank's terms are functions of: the image's unknowns, the pixels of its
    denoising pass, and the rank's share of the operators (1 on one rank)."""

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

    @property
    def held_out_error(self) -> float:
        """The run's relative error as its terms' held-out errors bound it: a sum of terms is
        off by no more than its worst term, relatively (0 where no term could hold a probe
        out). ``capacity --time`` keeps this margin under the time budget."""
        return max((fit.held_out_error for fit in self.terms()
                    if fit.held_out_error is not None), default=0.0)

    def one_probe_terms(self) -> list[str]:
        """The terms measured at one count only (time_laws.ONE_PROBE)."""
        return [fit.name for fit in self.terms() if fit.one_probe]

    def to_json(self) -> dict:
        return {"terms": [fit.to_json() for fit in self.terms()],
                "startup_s": self.startup_s, "held_out_error": self.held_out_error}


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


# What a prediction on several ranks leaves out (capacity's line and plan's table say it).
COMMUNICATION_NOT_INCLUDED = "communication not included (probed on one rank)"


def leaves_out_communication(ranks: int) -> bool:
    """Whether a prediction on ``ranks`` ranks leaves communication out: probes run on one
    rank, so every prediction on several does."""
    return ranks > 1


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
    if len(set(logs)) > 1:
        slope, intercept = linear_regression(logs, counts)
        if slope >= 0:
            return NormApplications(intercept, slope, limit)
    return NormApplications(mean(counts), 0.0, limit)


def norm_seconds(point, applications: NormApplications | None) -> float:
    """A probe's norm seconds as a run's: its own where its norm converged within the
    probe's cap; a capped one's whole-operator seconds scaled to the applications a run
    takes at its unknowns, no fewer than it ran (a norm not converged at the cap runs on:
    scaled to the 8 radio's small probes converged in, its set-up was predicted at 0.35 of
    the measured; to the limit, at 2.75), its start operator's seconds as measured."""
    timing = point.timing
    ran = timing["norm_applications"]
    if not timing["norm_capped"] or not ran or applications is None:
        return timing["norm_s"]
    start = timing.get("norm_start_s", 0.0)  # 0: timed before the start was timed apart
    return start + (timing["norm_s"] - start) * max(applications.at(point.unknowns), ran) / ran


def time_model(points) -> TimeModel | None:
    """The time model of a calibration's probes (``CalibrationPoint`` with timings); None when
    fewer than two sizes were timed (a calibration made before runs were timed)."""
    used = timed(points)
    if len({point.unknowns for point in used}) < 2:
        return None
    applications = norm_applications(used)
    # The steps its own probes ran: a probe borrowed from another algorithm of its family
    # (calibration.shared_points) times that algorithm's steps, not necessarily these.
    own = [point for point in used if not point.shared_from] or used
    names = sorted({name for point in own for name in point.timing["steps"]})
    knee = mapped_values()

    def term(name: str, probes, count=lambda p: p.unknowns, seconds=None) -> TermFit:
        return regime_fit(name, [(count(p), seconds(p), p.unknowns,
                                  bool(p.timing.get("image_mapped"))) for p in probes], knee)

    steps = tuple(term(name, [p for p in used if p.timing["steps"].get(name)],
                       lambda p, name=name: point_counts(p).of(name),
                       lambda p, name=name: step_time(p.timing, name)) for name in names)
    setup = term(SETUP, used, seconds=lambda p: p.timing["setup_s"] - p.timing["norm_s"])
    norm = None if not any(p.timing["norm_s"] for p in used) else \
        term(NORM, used, seconds=lambda p: norm_seconds(p, applications))
    evaluation = term(EVALUATION, used, seconds=lambda p: p.timing["evaluation_s"])
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
