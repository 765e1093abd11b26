"""scalebench.statistics, the one rule for figures over repetitions: each statistic against
Python's statistics module and numpy on the same values, missing figures (None, NaN, a pandas
NA), the spread's repetition rule, the range text, and the report and ``compare`` saying the
same about the same rows."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd
import pytest

from scalebench.results.compare_rules import UNKNOWN, Measure, Thresholds, verdict
from scalebench.results.report.repetitions import range_text, repetitions, values_text
from scalebench.statistics import MIN_REPETITIONS, figure, summary

NAN = float("nan")
SAMPLES = [[3.0], [4.0, 1.0], [4.0, 1.0, 2.0], [0.5, 7.25, 2.0, 2.0, 9.5],
           [1e-6, 3e-6, 2e-6, 8e-6]]


@pytest.mark.parametrize("values", SAMPLES)
def test_each_statistic_is_pythons_and_numpys(values):
    figures = summary(values)
    assert figures.count == len(values) and figures.missing == 0
    assert figures.median == statistics.median(values) == pytest.approx(np.median(values))
    assert figures.mean == pytest.approx(statistics.mean(values))
    assert figures.mean == pytest.approx(np.mean(values))
    assert (figures.lowest, figures.highest) == (np.min(values), np.max(values))
    if len(values) >= 2:
        assert figures.std == pytest.approx(np.std(values, ddof=1))
        assert figures.spread == pytest.approx(np.ptp(values))
    else:
        assert figures.std is None and figures.spread is None


@pytest.mark.parametrize("missing", [None, NAN, pd.NA, np.nan])
def test_a_missing_figure_counts_as_a_repetition_but_in_no_statistic(missing):
    figures = summary([4.0, missing, 1.0, 2.0])
    assert (figures.count, figures.missing, figures.values) == (4, 1, (4.0, 1.0, 2.0))
    assert figures.median == 2.0 and figures.mean == pytest.approx(7 / 3)
    assert figures.std == pytest.approx(np.nanstd([4.0, NAN, 1.0, 2.0], ddof=1))
    assert (figures.lowest, figures.highest) == (1.0, 4.0)
    assert figures.spread is None  # a missing figure may lie anywhere (a target not reached)
    assert figures.range_text() == "2 (3 of 4 measured)"


def test_nothing_measured_has_no_statistic_and_prints_a_dash():
    figures = summary([NAN, None])
    assert (figures.count, figures.missing) == (2, 2)
    assert {figures.median, figures.mean, figures.std, figures.lowest, figures.highest,
            figures.spread} == {None}
    assert figures.range_text() == "-" and summary([]).range_text() == "-"


def test_the_spread_needs_min_repetitions_which_is_two():
    assert MIN_REPETITIONS == 2
    assert summary([5.0]).spread is None
    assert summary([5.0, 6.5]).spread == 1.5
    assert summary([2.0, 1.0, 4.0]).relative_spread == 1.5  # (4 - 1) / 2
    assert summary([0.0, 0.0]).relative_spread == math.inf


def test_the_range_text_is_the_median_and_the_range_where_the_spread_is_known():
    assert summary([4.0, 1.0, 2.0]).range_text() == "2 (1–4)"
    assert summary([1.23456, 2.0]).range_text(digits=2, unit="s") == "1.6 (1.2–2) s"
    assert summary([7.0]).range_text() == "7"  # one repetition: the figure alone
    assert figure(NAN) == "-" and figure(None) == "-" and figure(0.123456, 2) == "0.12"


def test_the_report_and_compare_say_the_same_about_the_same_rows():
    time = Measure("grad (s/iteration)", "time", -1)
    runs = {"a": [1.0, 1.3], "b": [2.0, 2.5, 2.2], "c": [4.0], "d": [3.0, NAN, 3.5]}
    table = pd.DataFrame({"t": [v for values in runs.values() for v in values]},
                         index=[f"{name}/ranks1/rep{rep}/envx" for name, values in runs.items()
                                for rep in range(len(values))])
    report = repetitions(table, ["t"])
    for name, values in runs.items():
        series = f"{name}/ranks1/rep0/envx"
        side = summary(values)  # compare's side of these repetitions
        text = report.text("t", series)
        assert text == values_text(pd.Series(values)) == side.range_text()
        assert report.median.loc[series, "t"] == side.median
        if side.spread is None:  # no range in the report; compare: a figure missing is
            # 'unknown', a single run is judged by its factor
            assert "–" not in text and pd.isna(report.low.loc[series, "t"])
            assert verdict(time, side, side, Thresholds()) == (UNKNOWN if side.missing
                                                                else "same")
        else:
            low, high = (float(x) for x in text.split("(")[1].rstrip(")").split("–"))
            assert high - low == pytest.approx(side.spread, rel=1e-2)
            assert report.high.loc[series, "t"] - report.low.loc[series, "t"] == side.spread
            assert verdict(time, side, side, Thresholds()) == "same"
    assert range_text(2.0, 1.0, 3.0, 1) == "2"  # a derived range of one repetition
    assert range_text(2.0, 1.0, 3.0, MIN_REPETITIONS) == "2 (1–3)"
