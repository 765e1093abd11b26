"""The figure layout check (tests/support/figure_layout.py) finds what an unreadable figure
draws: overlapping labels, a legend over the data."""

from __future__ import annotations

from scalebench.results.report import FIGURE_DPI
from tests.support.figure_layout import layout_faults


def test_the_layout_check_finds_what_the_old_report_drew():
    """Twelve two-line bar labels in a short figure and a legend inside the axes, as the
    report drew them before: the check names both."""
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(10, 2.5))
    labels = [f"pnp on tomography_2d denoiser=tv\nimage_size={32 * (i % 2 + 1)} {i} ranks"
              for i in range(12)]
    for step in ("grad", "denoise"):
        axis.barh(labels, range(1, 13), label=step)
    axis.legend(loc="upper right")
    figure.set_dpi(FIGURE_DPI)
    faults = layout_faults(figure)
    plt.close(figure)
    assert len(faults) >= 2
    assert any(p.startswith("texts overlap: 'pnp on tomography_2d") for p in faults)
    assert any(p.startswith("legend drawn over the data") for p in faults)
