"""The verdict rules of ``scalebench compare``, standard library only: a side's median and
spread over repetitions, and when a difference between two sides counts.

A difference counts only beyond ``tolerance`` (a fraction of the base median) and beyond the
spread (highest minus lowest repetition) of both sides; with fewer than ``MIN_REPETITIONS``
figures on a side, or a figure missing (a target not reached), the spread is unknown and so
is the verdict.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

MIN_REPETITIONS = 3
# The default --tolerance: the smallest tried (5, 10, 20, 50 %) with no false alarm over
# identical campaigns on quiet cores (4 campaigns, 84 judgements, none at any tolerance; a
# one-thread run is judged 'faster' at 0.61x). On a loaded machine no tolerance is free of
# them: the load drifts between campaigns beyond any spread (docs/performance.md).
DEFAULT_TOLERANCE = 0.05
LOWER, HIGHER = -1, 1  # which way a measure is better
# Verdict words per kind of measure: (better, worse).
WORDS = {"time": ("faster", "slower"), "memory": ("smaller", "larger"),
         "quality": ("better", "worse"), "throughput": ("faster", "slower")}
SAME, UNKNOWN = "same", "unknown"


@dataclass(frozen=True)
class Measure:
    name: str
    kind: str  # a key of WORDS
    better: int  # LOWER or HIGHER


def _known(values: list[float]) -> list[float]:
    return [v for v in values if v is not None and not math.isnan(v)]


@dataclass
class Side:
    """One side's figures of a measure: one per repetition (NaN: not measured, not reached)."""
    values: list[float]

    @property
    def median(self) -> float | None:
        known = _known(self.values)
        return statistics.median(known) if known else None

    @property
    def spread(self) -> float | None:
        """Highest minus lowest repetition; None with fewer than MIN_REPETITIONS figures or
        one missing."""
        known = _known(self.values)
        if len(known) < MIN_REPETITIONS or len(known) < len(self.values):
            return None
        return max(known) - min(known)


def verdict(measure: Measure, base: Side, candidate: Side, tolerance: float) -> str:
    """faster/slower (smaller/larger, better/worse), same, or unknown."""
    spreads = (base.spread, candidate.spread)
    if None in spreads or not base.median:
        return UNKNOWN
    difference = candidate.median - base.median
    if abs(difference) <= tolerance * abs(base.median) or abs(difference) <= max(spreads):
        return SAME
    better, worse = WORDS[measure.kind]
    return better if difference * measure.better > 0 else worse


def is_regression(measure: Measure, word: str) -> bool:
    """Whether ``word`` says the candidate is worse (slower, more memory, lower quality)."""
    return word == WORDS[measure.kind][1]
