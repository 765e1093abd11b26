"""Figures over repetitions and over images: median, mean, standard deviation,
lowest-highest, the spread and the range and mean texts, one rule for the report and
``compare`` alike.

A figure may be missing (None or NaN): not measured, or a target not reached. Missing figures
count as repetitions (``count``) but enter no statistic, which is taken over the measured
ones; and since a missing figure may lie anywhere (a target reached late or never), a side
with one has no known spread. Standard library only: every layer may import it, the launcher
included.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

# Repetitions a spread needs: two or more measured (and none missing) give the range from the
# lowest to the highest; a single one is a figure alone.
MIN_REPETITIONS = 2


def measured(value: object) -> float | None:
    """``value`` as a float, or None when it is missing (None, NaN, a pandas NA)."""
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def figure(value: float | None, digits: int = 3) -> str:
    """A figure for a table: ``digits`` significant digits, '-' when missing."""
    return "-" if measured(value) is None else f"{value:.{digits}g}"


def range_text(median: float | None, lowest: float | None, highest: float | None,
               digits: int = 3) -> str:
    """'median (lowest–highest)', or the median alone where the range is unknown."""
    if measured(lowest) is None or measured(highest) is None:
        return figure(median, digits)
    return f"{figure(median, digits)} ({figure(lowest, digits)}–{figure(highest, digits)})"


@dataclass(frozen=True)
class Summary:
    """A figure over ``count`` repetitions (measured or not) and its statistics over the
    ``values`` measured; each None when nothing was measured (``std``: below two)."""

    count: int
    values: tuple[float, ...]

    @property
    def missing(self) -> int:
        return self.count - len(self.values)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        """The sample standard deviation (n - 1 in the denominator)."""
        return statistics.stdev(self.values) if len(self.values) >= 2 else None

    @property
    def lowest(self) -> float | None:
        return min(self.values) if self.values else None

    @property
    def highest(self) -> float | None:
        return max(self.values) if self.values else None

    @property
    def spread(self) -> float | None:
        """Highest minus lowest repetition: how far one repetition may stray. Unknown (None)
        below MIN_REPETITIONS or with a figure missing."""
        if self.count < MIN_REPETITIONS or self.missing:
            return None
        return self.highest - self.lowest

    @property
    def relative_spread(self) -> float | None:
        """The spread as a fraction of the median (inf for a median of 0)."""
        if self.spread is None:
            return None
        return self.spread / abs(self.median) if self.median else math.inf

    def range_text(self, digits: int = 3, unit: str = "") -> str:
        """'median (lowest–highest)' where the spread is known; the median alone for a
        single repetition, with how many were measured where some are missing; '-' when
        none was."""
        suffix = f" {unit}" if unit else ""
        if not self.values:
            return "-"
        if self.spread is not None:
            return range_text(self.median, self.lowest, self.highest, digits) + suffix
        text = figure(self.median, digits) + suffix
        return f"{text} ({len(self.values)} of {self.count} measured)" if self.missing \
            else text

    def mean_text(self, digits: int = 3) -> str:
        """'mean ± standard deviation (lowest–highest)' over the measured figures, with how
        many were measured where some are missing; the figure alone for one; '-' for none.
        Figures over images are read so (repetitions by their median: ``range_text``)."""
        if not self.values:
            return "-"
        text = figure(self.mean, digits)
        if len(self.values) >= MIN_REPETITIONS:
            text += (f" ± {figure(self.std, 2)} "
                     f"({figure(self.lowest, digits)}–{figure(self.highest, digits)})")
        return f"{text} ({len(self.values)} of {self.count} measured)" if self.missing \
            else text


def summary(values: Iterable[object]) -> Summary:
    """The Summary of ``values``, one per repetition (None or NaN: missing)."""
    given = list(values)
    return Summary(len(given), tuple(v for v in map(measured, given) if v is not None))
