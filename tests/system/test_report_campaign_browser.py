"""The seed campaign's report in Chromium: no text overlaps, the page fits the window, and
the page check finds overlapping text."""

from __future__ import annotations

from tests.support.browser import WIDTH, box_overlaps, visit
from tests.support.campaigns import SHOWN


def test_the_page_in_chromium_has_no_overlapping_text_and_fits_the_window(
        seed_campaign, chromium, tmp_path):
    _, page, _ = seed_campaign
    seen = visit(chromium, page)
    (tmp_path / "report.png").write_bytes(seen.screenshot)  # for a reader of the test
    assert seen.console_errors == []
    texts = [box for box in seen.boxes if not box["what"].startswith("<img")]
    figures = [box for box in seen.boxes if box["what"].startswith("<img")]
    assert len(figures) == len(SHOWN) and len(texts) > 300
    assert box_overlaps(seen.boxes) == []
    assert seen.content_width <= WIDTH
    assert max(box["x1"] for box in seen.boxes) <= WIDTH
    # Figures are shown at their own size (no down-scaling that would shrink their text).
    assert all(box["x1"] - box["x0"] <= 1100 for box in figures)


def test_the_page_check_finds_overlapping_text(chromium, tmp_path):
    page = tmp_path / "overlap.html"
    page.write_text('<html><body><p style="position:absolute;top:10px">peak memory</p>'
                    '<p style="position:absolute;top:14px;left:20px">1293.75 MiB</p>'
                    '<table><tr><td style="width:40px;white-space:nowrap;overflow:visible">'
                    + "x" * 300 + "</td></tr></table></body></html>")
    seen = visit(chromium, page)
    assert ("peak memory", "1293.75 MiB") in box_overlaps(seen.boxes)
    assert seen.content_width > WIDTH
