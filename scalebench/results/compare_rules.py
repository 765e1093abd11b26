"""The verdict rules of ``scalebench compare``, standard library only: when a difference
between two sides' medians over repetitions counts.

Each side's median and spread are ``scalebench.statistics``'s, as the report's are. With
``MIN_REPETITIONS`` or more figures on both sides, a difference counts only beyond the spread
(highest minus lowest repetition) of both sides and beyond ``tolerance`` (a fraction of the
base median). With one repetition on a side (a single run: no spread), a time, memory or
throughput difference counts when the ratio of the medians exceeds ``factor`` (asv's rule for
a single sample). Quality in dB (PSNR, SNR, asinh-PSNR) is compared in absolute dB, against
``quality_db``, whatever the repetitions; other quality (SSIM) against ``tolerance``. A figure
missing on a side (a target not reached) leaves the spread unknown and the verdict
``unknown``, except for a quality target that every repetition of one side reaches and no
repetition of the other does: that side is faster.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from provenance.stop_reasons import Stop
from scalebench.statistics import MIN_REPETITIONS, Summary

# The defaults of --factor (a single run on a side: a time, memory or throughput ratio of
# medians beyond it counts) and --tolerance (two or more repetitions: a ratio beyond 1 +
# tolerance, or below its inverse, and a difference beyond both sides' spread). Measured by
# tools/compare_check (docs/performance.md, "Compare as a gate"): five identical CT campaigns
# on one quiet core of this project's 2-core virtual machine, run in turn with five slowed
# ones (a busy loop on their core), at 1 and 3 repetitions. Identical campaigns drift apart by
# up to 1.65x on a time measure, and repetitions do not narrow it (the drift is between
# campaigns, the spread within one); the slowed ones are at least 2.08x slower on their most
# slowed measure. 1.8 lies between the two (1.09x above the drift, 1.16x below the slowdown);
# asv's 1.1, and the 1.5 and 25 % before, cried wolf here.
DEFAULT_FACTOR = 1.8
DEFAULT_TOLERANCE = 0.8
# The default --quality-tolerance, in dB: imaging papers separate methods by 0.1-0.3 dB, and
# repetitions of one experiment give equal quality far below it (CT: 0 dB apart, 7.7e-05 dB
# on another thread count).
DEFAULT_QUALITY_DB = 0.1
DB = "dB"
QUALITY_TEXT = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*dB\s*", re.IGNORECASE)
LOWER, HIGHER = -1, 1  # which way a measure is better
# Verdict words per kind of measure: (better, worse).
WORDS = {"time": ("faster", "slower"), "memory": ("smaller", "larger"),
         "quality": ("better", "worse"), "throughput": ("faster", "slower")}
SAME, UNKNOWN = "same", "unknown"
BETTER, WORSE = WORDS["quality"]
SINGLE_RUN = "single run"  # how a verdict from one repetition on a side is marked
CUT = "cut"  # a measure not judged: a side ended before its max_iter
CUT_ON_BOTH = "cut on both sides"


@dataclass(frozen=True)
class Measure:
    name: str
    kind: str  # a key of WORDS
    better: int  # LOWER or HIGHER
    unit: str = ""  # DB: compared in absolute dB
    target: bool = False  # a missing figure is a quality target never reached


@dataclass(frozen=True)
class Thresholds:
    """How far apart two sides must be for a difference to count."""

    tolerance: float = DEFAULT_TOLERANCE  # a ratio of medians beyond 1 + it (two or more runs)
    factor: float = DEFAULT_FACTOR  # a ratio of medians (a single run)
    quality_db: float = DEFAULT_QUALITY_DB  # dB, quality in dB

    def problem(self) -> str | None:
        """What is wrong with these thresholds (one line), or None."""
        if not 0 < self.tolerance < 1:
            return (f"--tolerance must be a fraction in (0, 1), e.g. 0.1 for 10 %; got "
                    f"{self.tolerance:g}")
        if not (math.isfinite(self.factor) and self.factor >= 1):
            return f"--factor must be a ratio of at least 1, e.g. 1.8; got {self.factor:g}"
        if not (math.isfinite(self.quality_db) and self.quality_db >= 0):
            return (f"--quality-tolerance must be at least 0 dB, e.g. 0.1dB; got "
                    f"{self.quality_db:g}dB")
        return None

    def text(self) -> str:
        return (f"a ratio beyond {1 + self.tolerance:g}x ({self.tolerance:.0%}) and beyond both "
                f"sides' spread (highest minus lowest repetition); a single run: a ratio "
                f"beyond {self.factor:g}x; quality in dB: {self.quality_db:g} dB")


def quality_db(text: str) -> float:
    """A --quality-tolerance as written ('0.1dB', '0.1 dB'): its dB; ValueError without the
    unit or for anything but a number of dB at least 0."""
    found = QUALITY_TEXT.fullmatch(text)
    if found is None:
        raise ValueError(f"--quality-tolerance must be a number of dB written with its unit, "
                         f"e.g. 0.1dB; got {text!r}")
    return float(found[1])


def single_run(base: Summary, candidate: Summary) -> bool:
    """Whether a side has fewer than MIN_REPETITIONS figures: no spread, the single-run
    rule."""
    return min(base.count, candidate.count) < MIN_REPETITIONS


def verdict(measure: Measure, base: Summary, candidate: Summary,
            thresholds: Thresholds) -> str:
    """faster/slower (smaller/larger, better/worse), same, or unknown."""
    better, worse = WORDS[measure.kind]
    if measure.target and _reached_by_all(base) and _reached_by_none(candidate):
        return worse
    if measure.target and _reached_by_none(base) and _reached_by_all(candidate):
        return better
    if base.missing or candidate.missing or not base.median or candidate.median is None:
        return UNKNOWN
    difference = candidate.median - base.median
    if _within(measure, base, candidate, thresholds):
        return SAME
    return better if difference * measure.better > 0 else worse


def _within(measure: Measure, base: Summary, candidate: Summary,
            thresholds: Thresholds) -> bool:
    """Whether the medians' difference is within the thresholds (and the spreads)."""
    difference = abs(candidate.median - base.median)
    spread = 0.0 if single_run(base, candidate) else max(base.spread, candidate.spread)
    if measure.kind == "quality":
        allowed = thresholds.quality_db if measure.unit == DB \
            else thresholds.tolerance * abs(base.median)
        return difference <= allowed or difference <= spread
    if single_run(base, candidate):
        return _within_ratio(base.median, candidate.median, thresholds.factor)
    return (_within_ratio(base.median, candidate.median, 1 + thresholds.tolerance)
            or difference <= spread)


def _within_ratio(base: float, candidate: float, factor: float) -> bool:
    """Whether candidate / base lies within [1 / factor, factor]: the same distance either
    way (twice as slow and twice as fast are both a factor of 2)."""
    ratio = candidate / base
    return ratio > 0 and 1 / factor <= ratio <= factor


def _reached_by_all(side: Summary) -> bool:
    return side.count > 0 and not side.missing


def _reached_by_none(side: Summary) -> bool:
    return side.count > 0 and not side.values


def cut_verdict(base: Stop, candidate: Stop) -> str | None:
    """An experiment that ended before its max_iter on a side (its time limit, a diverged
    estimate, pruned) is not comparable as if complete: worse where only the candidate was cut,
    better where only the base was, CUT_ON_BOTH where both were; None where both completed."""
    if base.early and candidate.early:
        return CUT_ON_BOTH
    if candidate.early:
        return WORSE
    return BETTER if base.early else None


def is_regression(measure: Measure, word: str) -> bool:
    """Whether ``word`` says the candidate is worse (slower, more memory, lower quality)."""
    return word == WORDS[measure.kind][1]
