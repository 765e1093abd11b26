"""benchopt's own plots (matplotlib figures and the HTML page) on the rows of a real run of
two solvers: every solver's curve is drawn, with the values the rows hold, for every column
it measured; a column a solver never measured draws no curve for it."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from tests.support.cli import copy_benchmark, run_cli, tiny_experiment, write_experiment

QUALITY = "objective_psnr_db"
GRAD_TIME = "objective_grad_time_s"  # measured by pnp from iteration 1, never by denoiser


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A pnp and a denoiser run (3 and 2 iterations) in a private benchmark copy."""
    folder = tmp_path_factory.mktemp("benchopt_plots")
    benchmark = copy_benchmark(folder)
    config = write_experiment(folder, tiny_experiment())
    done = run_cli("run", config, "--benchmark", benchmark, "--no-html", "--output", "plots",
                   "--outputs", benchmark / "outputs")
    assert done.returncode == 0, done.stderr[-2000:]
    path = benchmark / "outputs" / "plots.parquet"
    return benchmark, path, pd.read_parquet(path)


def _expected(rows: pd.DataFrame, column: str, axis: str) -> dict[str, tuple[list, list]]:
    """Per solver that measured ``column``: its x (time or iteration) and y at those rows."""
    expected = {}
    for solver, part in rows.groupby("solver_name"):
        part = part[part[column].notna()].sort_values("stop_val")
        if len(part):
            x = part["time"] if axis == "Time" else part["stop_val"]
            expected[solver] = (list(x.astype(float)), list(part[column].astype(float)))
    return expected


def test_matplotlib_figures_draw_every_solver_that_measured_the_column(run, tmp_path):
    """benchopt's plot data and its matplotlib rendering (the figures of two columns: all of
    them take minutes; the HTML test checks every curve's data)."""
    import matplotlib.pyplot as plt
    from benchopt.benchmark import Benchmark
    from benchopt.plotting.generate_matplotlib import get_plot_figure
    from benchopt.plotting.helpers import update_plot_data_style
    from benchopt.results import read_results

    benchmark, path, rows = run
    data, _ = Benchmark(benchmark).get_plot_data(read_results(path), ["objective_curve"])
    data = update_plot_data_style(data, plotly=False)["objective_curve"]
    for column in (QUALITY, GRAD_TIME):
        for axis in ("Time", "Iteration"):
            key = next(key for key in data if key.endswith(f"_{column}_{axis}"))
            figure, = get_plot_figure({key: data[key]}, tmp_path)
            drawn = {line.get_label(): ([float(v) for v in line.get_xdata()],
                                        [float(v) for v in line.get_ydata()])
                     for line in figure.axes[0].get_lines()}
            assert drawn == _expected(rows, column, axis)  # one repetition: the rows themselves
            plt.close(figure)
    pnp = rows[rows["solver_name"].str.startswith("pnp")]
    assert rows["solver_name"].nunique() == 2 and len(_expected(rows, QUALITY, "Time")) == 2
    assert list(_expected(rows, GRAD_TIME, "Iteration")) == [pnp["solver_name"].iloc[0]]
    assert _expected(rows, GRAD_TIME, "Iteration")[pnp["solver_name"].iloc[0]][0] == \
        [1.0, 2.0, 3.0]


def test_the_html_page_holds_every_curve_of_every_solver(run):
    """The page draws the benchmark's measures plot (its config.yml): every curve of every
    solver that measured a measure, the rank statistic where the rows hold one."""
    from benchopt.plotting import plot_benchmark

    benchmark, path, rows = run
    plot_benchmark(path, benchmark, display=False, html=True)
    page = (benchmark / "outputs" / f"{benchmark.name}_plots.html").read_text()
    plots = json.loads(re.search(r"window\._plots = (.*);\n", page).group(1))
    curves = plots["measures"]
    for key, plot in curves.items():
        for curve in plot["data"]:
            assert len(curve["x"]) == len(curve["y"]) > 0, (key, curve["label"])
    for column in (QUALITY, GRAD_TIME + "_max"):
        plot = next(p for key, p in curves.items() if key.endswith(f"_{column}_Time"))
        drawn = {c["label"]: (c["x"], c["y"]) for c in plot["data"]}
        assert drawn == _expected(rows, column, "Time")  # one repetition: the rows themselves
