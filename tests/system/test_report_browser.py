"""The report of real runs opened in a real browser (Chromium): plots shown offline, no
console error."""

from __future__ import annotations

import io

import numpy as np

from tests.support.browser import visit
from tests.support.cli import run_cli

CHROMIUM_SERVICE_HOSTS = ("google.com", "googleapis.com")  # the browser's own, not the page's


def _coloured_fraction(png: bytes) -> float:
    """Share of pixels with a clearly saturated colour (plot lines, bars, markers)."""
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    saturation = pixels.max(axis=2) - pixels.min(axis=2)
    return float((saturation > 80).mean())


def test_report_page_shows_plots_offline_without_console_errors(campaign, chromium, tmp_path):
    results, _ = campaign
    page = tmp_path / "report.html"
    result = run_cli("report", results, "-o", page, "--png", tmp_path / "png")
    assert result.returncode == 0, result.stderr
    seen = visit(chromium, page)
    assert seen.console_errors == [] and seen.requests == []
    assert not [a for a in seen.network_attempts
                if not any(host in a for host in CHROMIUM_SERVICE_HOSTS)]
    assert _coloured_fraction(seen.screenshot) > 0.01  # plotted lines, bars and images
    # The same checks fail on a page that loads a CDN script and logs an error.
    broken = tmp_path / "broken.html"
    broken.write_text('<html><head><script src="https://cdn.example.org/plotly.js"></script>'
                      '</head><body><script>console.error("boom")</script></body></html>')
    bad = visit(chromium, broken)
    assert "https://cdn.example.org/plotly.js" in bad.requests and "boom" in bad.console_errors
    assert any("cdn.example.org" in a for a in bad.network_attempts)
    assert _coloured_fraction(bad.screenshot) < 0.001
    pngs = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert pngs == ["memory.png", "quality.png", "steps.png", "strong_scaling.png",
                    "weak_scaling.png"]
