"""The report of real runs opened in a real browser (Chromium): plots shown offline, no
console error."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pandas as pd

from tests.support.browser import visit
from tests.support.cli import run_cli

CHROMIUM_SERVICE_HOSTS = ("google.com", "googleapis.com")  # the browser's own, not the page's
RECONSTRUCTION_IMAGES = ("<img ground truth>", "<img initial estimate>", "<img final estimate>")
PLOTS = 6  # quality, time to quality per method, steps, memory, strong and weak scaling


def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def _coloured(pixels: np.ndarray) -> np.ndarray:
    """Pixels with a clearly saturated colour (plot lines, bars, markers; never grey)."""
    return (pixels.max(axis=2) - pixels.min(axis=2)) > 80


def _region(pixels: np.ndarray, box: dict, margin: int = 2) -> np.ndarray:
    """The pixels inside ``box``, ``margin`` pixels in from its (fractional) edges."""
    return pixels[round(box["y0"]) + margin:round(box["y1"]) - margin,
                  round(box["x0"]) + margin:round(box["x1"]) - margin]


def _uniform_png(colour: tuple[int, int, int]) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), colour).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _replace_image(html: str, alt: str, source: str) -> str:
    """``html`` with the first image of alternative text ``alt`` showing ``source``."""
    return re.sub(rf'(<img[^>]*alt="{re.escape(alt)}" src=")[^"]*"', rf'\g<1>{source}"', html,
                  count=1)


def _images_not_painted(seen) -> list[str]:
    """Images the page shows without their content: not decoded, a plot (an image with a
    title) without a coloured mark, a reconstruction (grey) of one uniform shade."""
    pixels = _pixels(seen.screenshot)
    missing = []
    for box in (b for b in seen.boxes if b["what"].startswith("<img")):
        region = _region(pixels, box)
        marked = _coloured(region).sum() >= 100  # a few short plotted segments at least
        shaded = region.std() > 5
        is_reconstruction = box["what"] in RECONSTRUCTION_IMAGES
        if not box["decoded"] or not (shaded if is_reconstruction else marked):
            missing.append(box["what"])
    return missing


def test_report_page_shows_plots_offline_without_console_errors(campaign, chromium, tmp_path):
    results, _ = campaign
    page = tmp_path / "report.html"
    result = run_cli("report", results, "-o", page, "--png", tmp_path / "png")
    assert result.returncode == 0, result.stderr
    seen = visit(chromium, page)
    assert seen.console_errors == [] and seen.requests == []
    assert not [a for a in seen.network_attempts
                if not any(host in a for host in CHROMIUM_SERVICE_HOSTS)]
    images = [box["what"] for box in seen.boxes if box["what"].startswith("<img")]
    # Every image laid out (one of no size is not listed): the plots, and the ground truth,
    # initial and final estimates of each run (every run of the campaign saves its estimate).
    runs = len(pd.read_parquet(results, columns=["p_dataset_num_angles",
                                                 "p_solver_slurm_ntasks_per_node"])
               .drop_duplicates())
    assert len([i for i in images if i not in RECONSTRUCTION_IMAGES]) == PLOTS
    assert len(images) == PLOTS + len(RECONSTRUCTION_IMAGES) * runs == PLOTS + 12
    assert _images_not_painted(seen) == []
    # The same check names a plot that does not decode, a blank plot and a blank reconstruction.
    unpainted = tmp_path / "unpainted.html"
    unpainted.write_text(_replace_image(_replace_image(_replace_image(
        page.read_text(), "Quality vs iteration and vs time", "data:image/png;base64,AAAA"),
        "Weak scaling efficiency", _uniform_png((255, 255, 255))),
        "final estimate", _uniform_png((128, 128, 128))))
    assert _images_not_painted(visit(chromium, unpainted)) == [
        "<img Quality vs iteration and vs time>", "<img Weak scaling efficiency>",
        "<img final estimate>"]
    # The same checks fail on a page that loads a CDN script and logs an error.
    broken = tmp_path / "broken.html"
    broken.write_text('<html><head><script src="https://cdn.example.org/plotly.js"></script>'
                      '</head><body><script>console.error("boom")</script></body></html>')
    bad = visit(chromium, broken)
    assert "https://cdn.example.org/plotly.js" in bad.requests and "boom" in bad.console_errors
    assert any("cdn.example.org" in a for a in bad.network_attempts)
    assert _coloured(_pixels(bad.screenshot)).mean() < 0.001
    pngs = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert pngs == ["memory.png", "methods.png", "quality.png", "steps.png",
                    "strong_scaling.png", "weak_scaling.png"]
