"""The merged report of the seed's example campaign (12 real runs from 3 files), read from
the figures as drawn: no text overlaps, axes from 0, summary tables, whole numbers."""

from __future__ import annotations

import os
import re

import pytest

from scalebench.results.report import FIGURE_DPI, write_report
from scalebench.results.report.data import load_results
from scalebench.results.report.views import all_views
from tests.support.campaigns import RANKS, SHOWN
from tests.support.cli import edited_results
from tests.support.figure_layout import layout_faults

FLOAT_INTEGER = re.compile(r"=\d+\.0\b")  # num_operators=1.0


def _views(files):
    views = [view for view in all_views(load_results(files)) if view.figure is not None]
    for view in views:
        view.figure.set_dpi(FIGURE_DPI)  # the resolution the report draws them at
    return views


@pytest.fixture(scope="session")
def seed_views(seed_campaign):
    """The report's figures of the campaign, drawn once for the tests that read them."""
    import matplotlib.pyplot as plt

    views = _views(seed_campaign[0])
    yield views
    for view in views:
        plt.close(view.figure)


def test_the_campaign_is_twelve_runs_from_three_files(seed_campaign, seed_views):
    files, _, summary = seed_campaign
    results = load_results(files)
    table = results.rows.groupby("run").first()
    assert len(table) == 12 and len(results.files) == 3 and results.dropped == []
    counts = table.groupby(["p_solver_denoiser", "p_dataset_image_size",
                            "prov_world_size"]).size()
    assert len(counts) == 12 and set(counts) == {1}
    assert "12 run(s) from 3 file(s)" in summary
    assert [view.slug for view in seed_views] == SHOWN


def test_no_figure_text_overlaps_or_is_cut_off_and_legends_stay_off_the_data(seed_views):
    for view in seed_views:
        assert layout_faults(view.figure) == [], view.slug


def test_memory_and_speedup_axes_start_at_zero(seed_views):
    views = {view.slug: view for view in seed_views}
    memory = views["memory"].figure.axes[0]
    assert memory.get_ylim()[0] == 0 and memory.get_xlim()[0] == 0
    peaks = [line.get_ydata().max() for line in memory.get_lines()]
    assert max(peaks) < memory.get_ylim()[1] < 1.5 * max(peaks)
    speedup, efficiency = views["strong_scaling"].figure.axes[:2]
    assert speedup.get_ylim()[0] == 0 and efficiency.get_ylim() == (0, 1.15)
    assert [tick for tick in speedup.get_xticks()] == list(RANKS)


def test_every_view_has_its_summary_table(seed_campaign, seed_views):
    views = seed_views
    text = seed_campaign[1].read_text()
    assert text.count('<table class="summary">') == len(SHOWN)
    summaries = {view.slug: view.summary for view in views}
    assert len(summaries["steps"].rows) == len(summaries["memory"].rows) == 12
    # The per-step table has the campaign's steps, its communication (2 and 4 ranks), and how
    # busy each rank's cores were (mean over ranks, weighted by step time).
    steps = summaries["steps"]
    assert steps.header == ["run", "grad (s)", "denoise (s)", "of which communication (s)",
                            "total (s)", "CPU busy (cores)"]
    assert all(0 < float(row[-1]) <= os.cpu_count() + 0.5 for row in steps.rows)
    # Strong scaling: 2 solvers x 2 sizes over the 3 rank counts, speedup 1 on 1 rank.
    strong = summaries["strong_scaling"]
    assert len(strong.rows) == 12 and [row[1] for row in strong.rows[:3]] == ["1", "2", "4"]
    assert {row[3] for row in strong.rows if row[1] == "1"} == {"1"}
    # Weak scaling: 32x32 on 1 rank and 64x64 on 4 ranks, one series per solver.
    assert [row[1] for row in summaries["weak_scaling"].rows] == ["1", "4", "1", "4"]
    for view in views:
        for row in view.summary.rows:
            assert len(row) == len(view.summary.header)


def test_integer_parameters_print_as_integers_after_a_merge(seed_campaign, tmp_path):
    """A file without the num_operators column makes the merged column float: labels,
    legends and tables still print 4, not 4.0."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    files, _, _ = seed_campaign
    without = edited_results(files[0], tmp_path / "without.parquet",
                             lambda f: f.drop(columns="p_dataset_num_operators"))
    merged = [without, *files[1:]]
    results = load_results(merged)
    assert results.rows["p_dataset_num_operators"].dtype == float  # the case to print
    assert any("num_operators=4" in label for label in results.labels.values())
    texts = list(results.labels.values())
    for view in _views(merged):
        texts += [text.get_text() for text in view.figure.findobj(Text)]
        texts += [cell for row in view.summary.rows for cell in row]
        plt.close(view.figure)
    assert not [text for text in texts if FLOAT_INTEGER.search(text)]
    page = tmp_path / "merged.html"
    write_report(merged, page)
    assert not FLOAT_INTEGER.search(page.read_text())
