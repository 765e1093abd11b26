"""The report's view "methods at their tuned best": per study of a tuning's results file
(``scalebench tune``'s ``<name>.parquet``: rows with ``tune_study``, ``tune_trial``,
``tune_state``), the method's tuned setting, its test quality over the test images, the untuned
setting's beside it, what the tuning cost, and each trial's validation quality against each
tuned parameter.

The test run is an ordinary results file given to the same report (the tuned config's run):
its runs of the study's method whose tuned parameters equal the best trial's setting are the
tuned method's; its runs of the same method at another setting are the untuned ones. A
trial's quality is the tuning's objective: the mean over its validation images of each
image's best headline value within its iterations. Imports no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from scalebench.results.report.data import (
    RUN,
    Results,
    headline_metric,
    is_resource,
    parameter_text,
)
from scalebench.results.report.figures import (
    FIGURE_WIDTH,
    SMALL_FONT,
    Table,
    View,
    new_figure,
    number,
    skip,
    wrap,
)
from scalebench.results.report.methods import method_names, solver_of
from scalebench.results.report.over_images import images_of, images_text, over_images

SLUG, TITLE = "tuned", "Methods at their tuned best"
STUDY, TRIAL, STATE, CPU = "tune_study", "tune_trial", "tune_state", "tune_cpu_s"
# Solver parameters that are no setting of the method (how and where it ran).
NOT_SETTINGS = ("p_solver_seed", "p_solver_device", "p_solver_num_threads",
                "p_solver_profiler", "p_solver_save_estimate", "p_solver_eval_every")


@dataclass
class Study:
    name: str
    dataset: str  # the dataset (benchopt's name without its parameters)
    method: str
    metric: tuple[str, str]  # (column, label) of the headline metric
    parameters: list[str]  # the tuned solver parameter columns
    trials: pd.DataFrame  # per trial: state, quality, cpu, and each tuned parameter
    best: pd.Series  # the best complete trial's row of ``trials``
    validation: list[str]  # the validation images


def _quality(rows: pd.DataFrame, column: str) -> float:
    """The tuning's objective over ``rows`` (one trial or one test setting): the mean over
    images of each image's best value."""
    best = rows.groupby(RUN, sort=False)[column].max()
    images = images_of(rows).groupby(rows[RUN], sort=False).first()
    mean = over_images(best, images).mean
    return math.nan if mean is None else mean


def _tuned_parameters(rows: pd.DataFrame) -> list[str]:
    """The solver parameters that differ between the trials of one study."""
    first = rows.groupby(TRIAL, sort=False).first()
    return [c for c in first.columns if c.startswith("p_solver_") and not is_resource(c)
            and c not in NOT_SETTINGS and first[c].astype(str).nunique(dropna=False) > 1]


def _study(name: str, rows: pd.DataFrame) -> Study | None:
    metric = headline_metric(rows["dataset_name"].iloc[0])
    if metric[0] not in rows:
        return None
    parameters = _tuned_parameters(rows)
    table = {}
    for trial, part in rows.groupby(TRIAL, sort=False):
        table[trial] = {"state": part[STATE].iloc[0], "quality": _quality(part, metric[0]),
                        "cpu": part[CPU].iloc[0] if CPU in part else math.nan,
                        **{c: part[c].iloc[0] for c in parameters}}
    trials = pd.DataFrame.from_dict(table, orient="index")
    complete = trials[(trials["state"] == "complete") & trials["quality"].notna()]
    if complete.empty:
        return None
    return Study(name, solver_of(rows["dataset_name"].iloc[0]), method_names(rows).iloc[0],
                 metric, parameters, trials,
                 complete.loc[complete["quality"].idxmax()],
                 sorted(images_of(rows).dropna().unique()))


def _same(values: pd.Series, setting: object) -> pd.Series:
    """Whether each of ``values`` is ``setting`` (numbers within a relative 1e-9: a setting
    read back from YAML)."""
    numbers = pd.to_numeric(values, errors="coerce")
    if isinstance(setting, int | float) and not isinstance(setting, bool) \
            and numbers.notna().all():
        return (numbers - setting).abs() <= 1e-9 * max(abs(setting), 1e-300)
    return values.astype(str) == str(setting)


def _settings(study: Study, tests: pd.DataFrame) -> tuple[pd.DataFrame, list]:
    """The test rows of the study's method at its tuned setting, and per other setting of
    the method tested, (setting text, its rows)."""
    if tests.empty:
        return tests, []
    mine = tests[(method_names(tests) == study.method)
                 & (tests["dataset_name"].map(solver_of) == study.dataset)]
    if mine.empty or not all(c in mine for c in study.parameters):
        return mine.iloc[0:0], []
    tuned = pd.Series(True, index=mine.index)
    for column in study.parameters:
        tuned &= _same(mine[column], study.best[column])
    others = mine[~tuned]
    groups = others.groupby([others[c].astype(str) for c in study.parameters], sort=False) \
        if len(others) else []
    untuned = [(_setting_text(part.iloc[0], study.parameters), part) for _, part in groups]
    return mine[tuned], untuned


def _setting_text(row: pd.Series, parameters: list[str]) -> str:
    return " ".join(f"{c.removeprefix('p_solver_')}={parameter_text(row[c])}"
                    if pd.notna(row[c]) else f"{c.removeprefix('p_solver_')}=default"
                    for c in parameters)


def _test_text(rows: pd.DataFrame, column: str) -> str:
    best = rows.groupby(RUN, sort=False)[column].max()
    images = images_of(rows).groupby(rows[RUN], sort=False).first()
    return images_text(over_images(best, images), 4)


def _row(study: Study, tests: pd.DataFrame) -> list[str]:
    tuned, untuned = _settings(study, tests)
    states = study.trials["state"].value_counts()
    ended = int(states.get("complete", 0) + states.get("pruned", 0))
    cpu = study.trials["cpu"].sum(min_count=1)
    column = study.metric[0]
    return [study.method, _setting_text(study.best, study.parameters),
            _test_text(tuned, column) if len(tuned) else "not run",
            "; ".join(f"{text}: {_test_text(part, column)}" for text, part in untuned)
            or "not run",
            number(study.best["quality"], 4),
            f"{len(study.trials)} ({int(states.get('complete', 0))} complete, "
            f"{int(states.get('pruned', 0))} pruned, {int(states.get('fail', 0))} failed)",
            number(cpu, 3) if pd.notna(cpu) else "not recorded",
            f"{states.get('pruned', 0) / ended:.0%}" if ended else "-",
            ", ".join(study.validation)]


def _draw(axes, study: Study) -> None:
    for axis, column in zip(axes, study.parameters, strict=False):
        for state, style in (("complete", {"color": "C0", "marker": "o"}),
                             ("pruned", {"color": "grey", "marker": "o",
                                         "markerfacecolor": "none"}),
                             ("fail", {"color": "C3", "marker": "x"})):
            part = study.trials[study.trials["state"] == state]
            if len(part):
                axis.plot(pd.to_numeric(part[column], errors="coerce"), part["quality"],
                          linestyle="none", markersize=4, label=state, **style)
        axis.plot([study.best[column]], [study.best["quality"]], marker="*", markersize=11,
                  color="C1", linestyle="none", label="tuned")
        values = pd.to_numeric(study.trials[column], errors="coerce").dropna()
        if len(values) and (values > 0).all() and values.max() >= 10 * values.min():
            axis.set_xscale("log")
        axis.set(xlabel=column.removeprefix("p_solver_"),
                 ylabel=f"validation {study.metric[1]}")
        axis.set_title(wrap(study.method, 40), fontsize=SMALL_FONT + 1)
        axis.grid(alpha=0.3)
        axis.tick_params(labelsize=SMALL_FONT)
        axis.legend(fontsize=SMALL_FONT)
    for axis in axes[len(study.parameters):]:
        axis.set_visible(False)


def tuned_best(results: Results) -> View:
    rows = results.rows
    if STUDY not in rows or rows[STUDY].isna().all():
        return skip(SLUG, TITLE, "needs a tuning's results file (scalebench tune's "
                    "<name>.parquet, with columns tune_study, tune_trial and tune_state)")
    trials, tests = rows[rows[STUDY].notna()], rows[rows[STUDY].isna()]
    studies = [s for name, part in trials.groupby(STUDY, sort=False)
               for s in [_study(str(name), part)] if s is not None and s.parameters]
    if not studies:
        return skip(SLUG, TITLE, "no study of the tuning has a complete trial measuring its "
                    "headline metric and a parameter that differs between its trials")
    columns = max(len(s.parameters) for s in studies)
    figure, axes = new_figure(min(FIGURE_WIDTH, 3.6 * columns), 2.8 * len(studies),
                              len(studies), columns)
    for row, study in zip(axes, studies, strict=True):
        _draw(list(row), study)
    table = [_row(study, tests) for study in studies]
    missing = "" if not tests.empty else (
        "; no test run given: run the tuned config (scalebench run <name>.yml) and give its "
        "results file to the report beside the tuning's")
    return View(SLUG, TITLE, figure, trials,
                "per tuned parameter, each trial's validation quality (the tuning's "
                "objective: the mean over the validation images of each image's best value); "
                "open grey: pruned trials, their best before they were stopped; star: the "
                "tuned setting. The table: test quality over the test images of the test "
                "run's runs at the tuned setting and at any other setting of the method "
                "(untuned), mean ± std (lowest–highest); CPU seconds of every trial, pruned "
                "and failed ones included" + missing,
                Table(["method", "tuned setting", "test (tuned)", "test (untuned)",
                       "validation (tuned)", "trials", "CPU seconds", "pruned",
                       "validation images"], table))
