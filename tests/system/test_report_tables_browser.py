"""The report's tables fit the page in a real browser (Chromium): a 10-run methods comparison
(PGD, FISTA, DRS, DPIR with TV at two strengths, FBP with two filters, on CT 128²) gives a
per-step table of the steps the runs have, within the page's width, whose run names read on
a few lines (not one letter per line past the page's right edge)."""

from __future__ import annotations

import io
from collections import defaultdict

import pandas as pd

from scalebench.results.report.data import RUN, Results, run_labels
from scalebench.results.report.page import render_page
from scalebench.results.report.views import all_views
from tests.support.browser import WIDTH, visit

NAN = float("nan")
# method -> the steps of its iterations
METHODS = {"pgd": ("grad", "denoise"), "fista": ("grad", "denoise"),
           "drs": ("prox", "denoise"), "dpir": ("prox", "denoise")}


def _run(index: int, solver: str, parameters: dict, steps: tuple[str, ...]) -> pd.DataFrame:
    n = 6 if steps != ("backproject",) else 2
    rows = {RUN: f"run{index}", "solver_name": solver, "idx_rep": 0,
            "dataset_name": "tomography_2d[image_size=128,noise_level=0.05,num_angles=60]",
            "objective_name": "imaging_inverse_problem", "p_dataset_image_size": 128,
            **{f"p_solver_{k}": v for k, v in parameters.items()},
            "stop_val": range(n), "time": [0.3 * k for k in range(n)],
            "objective_psnr_db": [12.0 + index * 0.1 + 2.5 * k for k in range(n)]}
    for step in steps:
        rows[f"objective_{step}_time_s_max"] = [NAN] + [0.01 * (index + 1)] * (n - 1)
        rows[f"objective_{step}_comm_time_s_max"] = [NAN] + [0.0] * (n - 1)
        rows[f"objective_{step}_cpu_utilization_mean"] = [NAN] + [1.7] * (n - 1)
        rows[f"objective_{step}_peak_host_rss_mib_max"] = [NAN] + [1250.0] * (n - 1)
    return pd.DataFrame(rows)


def _ten_runs() -> Results:
    runs = []
    for algorithm, steps in METHODS.items():
        for sigma in (0.001, 0.01):
            runs.append(_run(len(runs), f"pnp[algorithm={algorithm},denoiser=tv,"
                             f"denoiser_sigma={sigma}]", {"algorithm": algorithm,
                             "denoiser": "tv", "denoiser_sigma": sigma}, steps))
    for window in ("ram-lak", "hann"):
        runs.append(_run(len(runs), f"fbp[filter={window}]", {"filter": window},
                         ("backproject",)))
    rows = pd.concat(runs, ignore_index=True)
    return Results(rows, labels=run_labels(rows))


def test_a_ten_run_per_step_table_fits_the_page_and_its_run_names_read(chromium, tmp_path):
    results = _ten_runs()
    assert len(results.runs()) == 10
    views = []
    for view in all_views(results):
        png = None
        if view.figure is not None:
            buffer = io.BytesIO()
            view.figure.savefig(buffer, format="png", dpi=60)
            png = buffer.getvalue()
        views.append((view, png))
    steps = next(view for view, _ in views if view.slug == "steps")
    assert steps.summary.header == ["run", "grad (s)", "prox (s)", "denoise (s)",
                                    "backproject (s)", "total (s)", "CPU busy (cores)"]
    page = tmp_path / "report.html"
    page.write_text(render_page(results, views, []))
    seen = visit(chromium, page)
    assert seen.console_errors == []
    assert seen.content_width <= WIDTH  # nothing past the page's right edge
    assert max(box["x1"] for box in seen.boxes) <= WIDTH
    lines = defaultdict(list)  # per text node: its lines
    for box in seen.boxes:
        lines[(box["what"], box["node"])].append(box)
    for label in results.labels.values():
        cells = [boxes for (what, _), boxes in lines.items() if what == label[:80]]
        # the quality, time-to-quality, per-step and memory tables name every run
        assert len(cells) == 4, (label, len(cells))
        assert max(len(boxes) for boxes in cells) <= 3, label  # readable: a few lines
