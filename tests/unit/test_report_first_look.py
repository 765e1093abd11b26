"""What a results file shows first: the per-step table has the steps the runs have ('-' where
a run has no such step, communication only where some run communicated); the standalone
denoiser is drawn apart from the reconstructions; the closing line names the best quality,
its method and the time it took; views with nothing to show are listed together at the end."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from scalebench.results.report.data import RUN, Results, run_labels
from scalebench.results.report.page import render_page
from scalebench.results.report.steps import step_breakdown
from scalebench.results.report.summary import best_quality_lines, closing_lines
from scalebench.results.report.views import all_views, quality

NAN = float("nan")
CT = "tomography_2d[image_size=128]"


def _run(run: str, solver: str, psnr: list[float], steps: dict[str, float],
         busy: float = 1.0, comm: float = 0.0) -> pd.DataFrame:
    """One run's rows: iteration 0 (no step yet), then one row per PSNR value."""
    n = len(psnr)
    rows = {RUN: run, "solver_name": solver, "dataset_name": CT, "idx_rep": 0,
            "objective_name": "imaging_inverse_problem", "p_dataset_image_size": 128,
            "p_solver_algorithm": solver.split("=")[-1].rstrip("]") if "=" in solver else NAN,
            "stop_val": range(n), "time": [0.5 * k for k in range(n)], "objective_psnr_db": psnr}
    for step, seconds in steps.items():
        rows[f"objective_{step}_time_s_max"] = [NAN] + [seconds] * (n - 1)
        rows[f"objective_{step}_comm_time_s_max"] = [NAN] + [comm] * (n - 1)
        rows[f"objective_{step}_cpu_utilization_mean"] = [NAN] + [busy] * (n - 1)
    return pd.DataFrame(rows)


def _results(*runs: pd.DataFrame) -> Results:
    rows = pd.concat(runs, ignore_index=True)
    return Results(rows, labels=run_labels(rows))


def _methods() -> Results:
    return _results(
        _run("a", "pnp[algorithm=pgd]", [15, 20, 22], {"grad": 0.1, "denoise": 0.2}, 2.0),
        _run("b", "pnp[algorithm=drs]", [15, 25, 29.9], {"prox": 0.3, "denoise": 0.1}),
        _run("c", "fbp[filter=hann]", [12, 24.7], {"backproject": 0.15}),
        _run("d", "denoiser[denoiser=tv]", [28, 34, 34], {"denoise": 0.05}))


def test_the_per_step_table_has_the_steps_the_runs_have_and_no_zero_for_missing_ones():
    view = step_breakdown(_methods())
    plt.close(view.figure)
    header, rows = view.summary.header, view.summary.rows
    # five steps exist; these runs have four (no zero columns for a fifth, no communication)
    assert header == ["run", "grad (s)", "prox (s)", "denoise (s)", "backproject (s)",
                      "total (s)", "CPU busy (cores)"]
    table = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert len(rows) == 3  # the standalone denoiser has its own view
    pgd = table["pnp on tomography_2d algorithm=pgd"]
    assert (pgd["grad (s)"], pgd["prox (s)"], pgd["total (s)"]) == ("0.1", "-", "0.3")
    assert table["fbp on tomography_2d"]["backproject (s)"] == "0.15"
    # time-weighted CPU busy: (2 x 0.1 + 2 x 0.2) / 0.3
    assert pgd["CPU busy (cores)"] == "2"


def test_the_per_step_table_adds_communication_only_where_a_run_communicated():
    quiet = step_breakdown(_methods())
    assert not any("communication" in h for h in quiet.summary.header)
    busy = step_breakdown(_results(
        _run("a", "pnp[algorithm=pgd]", [15, 20], {"grad": 0.4}, comm=0.1),
        _run("b", "pnp[algorithm=drs]", [15, 25], {"prox": 0.3})))
    assert busy.summary.header == ["run", "grad (s)", "prox (s)", "of which communication (s)",
                                   "total (s)", "CPU busy (cores)"]
    assert [row[3] for row in busy.summary.rows] == ["0.1", "0"]
    plt.close(quiet.figure)
    plt.close(busy.figure)


def test_the_standalone_denoiser_is_drawn_apart_from_the_reconstructions():
    results = _methods()
    views = {view.slug: view for view in all_views(results)}
    assert set(views["quality"].rows[RUN]) == {"a", "b", "c"}
    denoiser = views["denoiser"]
    assert [row[0] for row in denoiser.summary.rows] == ["denoiser on tomography_2d"]
    assert denoiser.summary.rows[0][1:] == ["0.05", "-", "PSNR 34"]
    only_denoiser = quality(_results(_run("d", "denoiser[denoiser=tv]", [28, 34], {})))
    assert only_denoiser.figure is None and "own view" in only_denoiser.note
    for view in views.values():
        if view.figure is not None:
            plt.close(view.figure)


def test_the_closing_line_names_the_best_quality_its_method_and_how_long_it_took():
    results = _methods()
    assert best_quality_lines(results.rows) == [
        "best PSNR on tomography_2d: 29.9 dB, by pnp algorithm=drs, after 1 s of solver "
        "time (iteration 2, set-up excluded)"]
    assert closing_lines(results) == best_quality_lines(results.rows)[0]


def test_views_with_nothing_to_show_are_listed_together_at_the_end():
    results = _methods()
    views = [(view, b"png" if view.figure is not None else None)
             for view in all_views(results)]
    for view, _ in views:
        if view.figure is not None:
            plt.close(view.figure)
    page = render_page(results, views, [])
    # each view with nothing to show, the images and the provenance (none in these rows)
    assert page.count("Not shown") == len([v for v, png in views if png is None]) + 2
    assert page.index("<h2>Views not shown</h2>") > page.index("<h2>Provenance")
    assert page.index("<p><b>Best PSNR on tomography_2d: 29.9 dB") < page.index("<h2>")
