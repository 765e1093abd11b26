"""A run's repetitions in every view that plots time: the median, with an error bar or a band
from the lowest to the highest repetition, and tables that print 'median (lowest–highest)';
a single repetition draws and prints its figure alone."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.container import ErrorbarContainer

from scalebench.results.report.data import RUN, Results, run_labels
from scalebench.results.report.denoiser import standalone_denoiser
from scalebench.results.report.repetitions import range_text, repetitions, values_text
from scalebench.results.report.scaling import strong_scaling, weak_scaling
from scalebench.results.report.steps import step_breakdown
from scalebench.results.report.training import training
from scalebench.results.report.views import compile_speedup

NAN = float("nan")
CT = "tomography_2d[image_size=128]"
PNP = "pnp[algorithm=pgd]"


def _rep(rep: int, per_iteration: float, figures: dict[str, float], world: int = 1,
         solver: str = PNP, config: str = "cafe", **parameters) -> pd.DataFrame:
    """One repetition's rows: iteration 0, then two iterations of ``per_iteration`` seconds,
    each with ``figures`` (iteration 0 measures no step)."""
    rows = {RUN: f"{config}/ranks{world}/rep{rep}/envx", "solver_name": solver,
            "dataset_name": CT, "idx_rep": rep, "objective_name": "imaging_inverse_problem",
            "prov_config_hash": config, "prov_world_size": world, "stop_val": range(3),
            "time": [per_iteration * k for k in range(3)],
            "objective_psnr_db": [10.0, 20.0, 30.0 + rep], **parameters}
    rows.update({column: [NAN, value, value] for column, value in figures.items()})
    return pd.DataFrame(rows)


def _results(*runs: pd.DataFrame) -> Results:
    rows = pd.concat(runs, ignore_index=True)
    return Results(rows, labels=run_labels(rows))


def _error_bars(axis) -> list[tuple[float, float]]:
    """The horizontal extent of every error bar drawn on ``axis``, lowest to highest."""
    return [tuple(round(float(x), 6) for x in (segment[:, 0].min(), segment[:, 0].max()))
            for container in axis.containers if isinstance(container, ErrorbarContainer)
            for collection in container.lines[2] for segment in collection.get_segments()]


def _band(axis) -> tuple[float, float]:
    """The vertical extent of the one band drawn on ``axis``."""
    (band,) = axis.collections
    heights = band.get_paths()[0].vertices[:, 1]
    return round(float(heights.min()), 3), round(float(heights.max()), 3)


def _table(view) -> list[dict[str, str]]:
    plt.close(view.figure)
    return [dict(zip(view.summary.header, row, strict=True)) for row in view.summary.rows]


def test_a_series_is_the_run_without_its_repetition_with_median_lowest_and_highest():
    table = pd.DataFrame({"t": [4.0, 1.0, 2.0, 7.0]},
                         index=["h/ranks1/rep0/envx", "h/ranks1/rep1/envx",
                                "h/ranks1/rep2/envx", "h/ranks2/rep0/envx"])
    spread = repetitions(table, ["t"])
    assert list(spread.first.index) == ["h/ranks1/rep0/envx", "h/ranks2/rep0/envx"]
    assert list(spread.count) == [3, 1]
    assert spread.text("t", "h/ranks1/rep0/envx") == "2 (1–4)"
    assert spread.text("t", "h/ranks2/rep0/envx") == "7"  # one repetition: no range
    assert spread.errors("t") == [[1.0, 0.0], [2.0, 0.0]]
    assert range_text(NAN, NAN, NAN, 3) == "-"
    assert values_text(pd.Series([3.0, 1.0])) == "2 (1–3)"  # two repetitions: a range
    # a repetition without the figure: no range known, as compare says (scalebench.statistics)
    assert values_text(pd.Series([3.0, NAN, 1.0])) == "2 (2 of 3 measured)"


def test_the_per_step_bars_show_each_step_s_median_and_the_total_s_range():
    steps = [{"objective_grad_time_s_max": grad, "objective_denoise_time_s_max": 0.1}
             for grad in (0.4, 0.1, 0.2)]
    single = _rep(0, 1.0, {"objective_grad_time_s_max": 0.3}, config="dd",
                  solver="pnp[algorithm=drs]", p_solver_algorithm="drs")
    view = step_breakdown(_results(*(_rep(rep, 1.0, step, p_solver_algorithm="pgd")
                                     for rep, step in enumerate(steps)), single))
    # the totals' range; the run of one repetition beside it has no error bar
    assert _error_bars(view.figure.axes[0]) == [(0.2, 0.5)]
    row, alone = _table(view)
    assert (alone["run"], alone["total (s)"]) == ("pnp on tomography_2d algorithm=drs", "0.3")
    assert row["run"] == "pnp on tomography_2d algorithm=pgd"  # one bar, three repetitions
    assert (row["grad (s)"], row["denoise (s)"], row["total (s)"]) == \
        ("0.2 (0.1–0.4)", "0.1 (0.1–0.1)", "0.3 (0.2–0.5)")


def test_the_standalone_denoiser_bar_is_the_median_call_with_its_range():
    view = standalone_denoiser(_results(*(
        _rep(rep, 1.0, {"objective_denoise_time_s_max": seconds}, solver="denoiser")
        for rep, seconds in enumerate((3.0, 1.0, 2.0)))))
    assert _error_bars(view.figure.axes[0]) == [(1.0, 3.0)]
    (row,) = _table(view)
    assert (row["seconds per call"], row["quality of its output (dB)"]) == \
        ("2 (1–3)", "PSNR 31 (30–32)")


def _strong(ranks_1: tuple, ranks_2: tuple) -> Results:
    return _results(*(_rep(rep, seconds, {}, world=world)
                      for world, times in ((1, ranks_1), (2, ranks_2))
                      for rep, seconds in enumerate(times)))


def test_strong_scaling_draws_median_lines_with_bands_and_ratios_of_medians():
    view = strong_scaling(_strong((1.0, 1.2, 1.6), (0.5, 0.9, 0.6)))
    speedup, efficiency = view.figure.axes[:2]
    assert _band(speedup) == (0.75, 2.4) and _band(efficiency) == (0.667, 1.2)
    assert "median" in view.note
    rows = _table(view)
    assert [row["time per iteration (s)"] for row in rows] == ["1.2 (1–1.6)", "0.6 (0.5–0.9)"]
    assert (rows[1]["speedup"], rows[1]["efficiency"]) == ("2 (1.33–2.4)", "1 (0.667–1.2)")


def test_weak_scaling_draws_the_median_efficiency_with_its_band():
    view = weak_scaling(_results(*(
        _rep(rep, seconds, {}, world=world, p_dataset_num_angles=10 * world)
        for world, times in ((1, (1.0, 1.2, 1.6)), (2, (1.0, 1.2, 2.0)))
        for rep, seconds in enumerate(times))))
    assert _band(view.figure.axes[0]) == (0.6, 1.2)
    rows = _table(view)
    assert [row["efficiency"] for row in rows] == ["1 (0.75–1.2)", "1 (0.6–1.2)"]


def test_the_compile_speedup_is_the_ratio_of_medians_with_the_repetitions_range():
    view = compile_speedup(_results(*(
        _rep(rep, 1.0, {"objective_denoise_time_s_max": seconds}, config=config,
             p_solver_compile=compiled)
        for config, compiled, times in (("aa", False, (2.0, 3.0, 4.0)),
                                        ("bb", True, (1.0, 1.5, 2.0)))
        for rep, seconds in enumerate(times))))
    assert _error_bars(view.figure.axes[0]) == [(1.0, 4.0)]
    (row,) = _table(view)
    assert list(row.values())[1:] == ["3 (2–4)", "1.5 (1–2)", "2 (1–4)"]


def test_training_throughput_is_the_median_with_an_error_bar():
    view = training(_results(*(
        _rep(rep, 1.0, {"objective_throughput_pixels_per_s": rate}, solver="train")
        for rep, rate in enumerate((400.0, 100.0, 200.0)))))
    assert _error_bars(view.figure.axes[0]) == [(100.0, 400.0)]
    (row,) = _table(view)
    assert row["objective_throughput_pixels_per_s"] == "200 (100–400)"


def test_a_single_repetition_draws_no_band_and_prints_its_figure_alone():
    step = {"objective_grad_time_s_max": 0.4, "objective_denoise_time_s_max": 0.1}
    steps = step_breakdown(_results(_rep(0, 1.0, step)))
    assert _error_bars(steps.figure.axes[0]) == []
    assert _table(steps)[0]["total (s)"] == "0.5"
    denoiser = standalone_denoiser(_results(_rep(0, 1.0, step, solver="denoiser")))
    assert _error_bars(denoiser.figure.axes[0]) == []
    assert _table(denoiser)[0]["seconds per call"] == "0.1"
    strong = strong_scaling(_strong((1.2,), (0.6,)))
    assert all(len(axis.collections) == 0 for axis in strong.figure.axes)
    assert [row["speedup"] for row in _table(strong)] == ["1", "2"]
    throughput = training(_results(_rep(0, 1.0, {"objective_throughput_pixels_per_s": 9.0},
                                        solver="train")))
    assert _error_bars(throughput.figure.axes[0]) == []
    assert _table(throughput)[0]["objective_throughput_pixels_per_s"] == "9"
