"""The verdict rules of ``scalebench compare``, standard library only: when a difference
between two sides' medians over repetitions counts.

A difference counts only beyond ``tolerance`` (a fraction of the base median) and beyond the
spread (highest minus lowest repetition) of both sides; each side's median and spread are
``scalebench.statistics``'s, as the report's are: with fewer than ``MIN_REPETITIONS`` figures
on a side, or a figure missing (a target not reached), the spread is unknown and so is the
verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalebench.statistics import Summary

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


def verdict(measure: Measure, base: Summary, candidate: Summary, tolerance: float) -> str:
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
