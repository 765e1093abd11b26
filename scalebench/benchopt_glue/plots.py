"""benchopt's own plots (``benchopt plot``, and those ``benchopt run`` draws) on scalebench's
rows: the measures that matter, one figure per measure and dataset.

benchopt 1.10 draws every ``objective_*`` column with every plot kind: the 57 columns of a
two-run inference result gave 448 figures in 212 s, and their file names, cut at the first
dot after the dataset's parameters (``noise_level=0.05``: ``Path.with_suffix``), overwrote
each other. Each benchmark folder's ``config.yml`` therefore lists benchopt's ``plots``: its
``measures`` plot alone (``plots/measures.py``, a ``MeasureCurve``), which draws each
dataset's headline quality metrics, each step's time and each step's peak memory against
solver time, with saved views (``plot_configs``) for the comparisons users make. Views name
columns; ``view_problems`` lists those a benchmark's rows cannot hold (the project's tests
call it, so a wrong name never reaches plot time).

A step's figures are missing at iteration 0 (no step ran yet) and on every row of a solver
without that step (the standalone denoiser has no ``grad`` step). benchopt's
``ObjectiveCurvePlot`` takes a solver's y values from a pivot table, which drops the missing
ones, but its time axis from every iteration: x and y of different lengths, which matplotlib
refuses. Every curve here is drawn from the rows that measured the column instead; filling
them with numbers would print figures that were never measured.
"""

from __future__ import annotations

import pandas as pd
from benchopt.plotting.default_plots import ObjectiveCurvePlot

from scalebench.rank.names import INFERENCE_STEPS, TRAINING_STEPS
from scalebench.results.report.data import headline_metric
from scalebench.results.report.methods import dataset_labels

# Memory kinds a step's peak is recorded in (the CUDA one on GPUs only).
MEMORY_KINDS = ("host_rss", "cuda_alloc")
# The rank statistic plotted where rows hold one (a multi-rank run is as slow and as large
# as its slowest, largest rank); rank 0's column otherwise.
OVER_RANKS = "_max"


def _with_rank_statistic(columns: list[str]) -> tuple[str, ...]:
    return tuple(name for column in columns for name in (column + OVER_RANKS, column))


# Every column the measures plot may draw, in figure order; the rows decide which it does.
INFERENCE_MEASURES = ("objective_psnr_db", "objective_snr_db", *_with_rank_statistic(
    [f"objective_{step}_time_s" for step in INFERENCE_STEPS]
    + [f"objective_{step}_peak_{kind}_mib" for kind in MEMORY_KINDS for step in INFERENCE_STEPS]))
TRAINING_MEASURES = ("objective_loss", "objective_psnr_db", *_with_rank_statistic(
    [f"objective_{step}_time_s" for step in TRAINING_STEPS]
    + [f"objective_step_peak_{kind}_mib" for kind in MEMORY_KINDS]))
# Quality columns drawn only for the datasets whose headline metric they are (the SNR of a
# CT reconstruction repeats its PSNR; radio skies are judged by SNR).
HEADLINE_ONLY = ("objective_psnr_db", "objective_snr_db")


def figure_label(text: str) -> str:
    """``text`` as part of a file name benchopt keeps whole: matplotlib figures are saved as
    ``Path(key).with_suffix('.pdf')``, which cuts the key at its last dot, and a slash would
    name a folder."""
    return str(text).replace(".", "p").replace("/", "-")


def dataset_choices(rows: pd.DataFrame) -> dict[str, str]:
    """Per figure label (the dataset with the parameters that differ between the datasets of
    ``rows``, made file-name safe): benchopt's dataset name."""
    return {figure_label(label): name for name, label in dataset_labels(rows).items()}


def measure_columns(rows: pd.DataFrame, measures: tuple[str, ...]) -> list[str]:
    """The ``measures`` ``rows`` hold a number of (a column and its rank statistic: the
    statistic), the quality ones only where some dataset's headline metric."""
    headlines = {headline_metric(name)[0] for name in rows["dataset_name"].unique()}
    found = []
    for column in measures:
        if column not in rows or not pd.api.types.is_numeric_dtype(rows[column]) or \
                rows[column].notna().sum() == 0:
            continue
        if column in HEADLINE_ONLY and column not in headlines:
            continue
        if column.removesuffix(OVER_RANKS) in found or column + OVER_RANKS in found:
            continue
        found.append(column)
    return found


def measure_name(column: str) -> str:
    """The y label of a measure: 'PSNR (dB)', 'grad step: time (s)', ..."""
    base = column.removeprefix("objective_").removesuffix(OVER_RANKS)
    suffix = " (max over ranks)" if column.endswith(OVER_RANKS) else ""
    names = {"psnr_db": "PSNR (dB)", "snr_db": "SNR (dB)", "loss": "training loss"}
    if base in names:
        return names[base]
    if "_peak_" in base:
        step, kind = base.split("_peak_", 1)
        where = "host memory" if kind.startswith("host_rss") else "CUDA memory"
        return f"{step} step: peak {where} (MiB){suffix}"
    return f"{base.removesuffix('_time_s')} step: time (s){suffix}"


class MeasuredObjectiveCurve(ObjectiveCurvePlot):
    """benchopt's ``objective_curve`` (same name, options and figures), on the rows where the
    plotted column was measured. A benchmark's ``plots/objective_curve.py`` subclasses it:
    benchopt keeps the data of the last plot of a name, and lists a benchmark's plots after
    its own."""

    def plot(self, df: pd.DataFrame, dataset: str, objective: str, objective_column: str,
             X_axis: str) -> list[dict]:
        if pd.api.types.is_numeric_dtype(df[objective_column]):
            df = df[df[objective_column].notna()]
        return super().plot(df, dataset, objective, objective_column, X_axis)


class MeasureCurve(MeasuredObjectiveCurve):
    """One curve per solver of a measure against solver time, one figure per measure and
    dataset. A benchmark's ``plots/measures.py`` subclasses it with ``measure_options``."""

    name = "measures"

    def plot(self, df: pd.DataFrame, dataset: str, objective: str, objective_column: str,
             X_axis: str) -> list[dict]:
        name = dataset_choices(df)[dataset]
        if objective_column not in df:
            return []
        return super().plot(df, name, objective, objective_column, X_axis)

    def get_metadata(self, df: pd.DataFrame, dataset: str, objective: str,
                     objective_column: str, X_axis: str) -> dict:
        return {"title": f"{objective}\n{dataset}", "xlabel": "solver time (s)"
                if X_axis == "Time" else X_axis, "ylabel": measure_name(objective_column),
                "scale": "linear"}


def measure_options(measures: tuple[str, ...]) -> dict:
    """A ``MeasureCurve``'s options: every dataset, every objective, the ``measures`` the rows
    hold, against solver time (one figure each)."""
    return {"dataset": lambda rows: list(dataset_choices(rows)), "objective": ...,
            "objective_column": lambda rows: measure_columns(rows, measures),
            "X_axis": ["Time"]}


def view_problems(config: dict, measures: tuple[str, ...]) -> list[str]:
    """What is wrong in a benchmark's benchopt ``config`` (its ``config.yml``): a listed plot
    or a view's ``plot_kind`` other than ``measures``, a view's column no measure."""
    problems = [f"plots lists {kind!r}: only 'measures' is drawn"
                for kind in config.get("plots", []) if kind != MeasureCurve.name]
    for view, options in config.get("plot_configs", {}).items():
        if options.get("plot_kind") != MeasureCurve.name:
            problems.append(f"view {view!r}: plot_kind {options.get('plot_kind')!r}, "
                            f"allowed: {MeasureCurve.name!r}")
        column = options.get(f"{MeasureCurve.name}_objective_column")
        if column not in measures:
            problems.append(f"view {view!r}: column {column!r} is no measure the rows hold; "
                            f"allowed: {', '.join(measures)}")
    return problems
