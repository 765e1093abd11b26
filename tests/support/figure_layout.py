"""Layout of a matplotlib figure as drawn: where its texts and legends land (window extents in
display pixels, after a real draw), for tests that a figure is readable without looking at it.

``layout_faults(figure)`` lists, one line each: two texts whose boxes overlap, a text or
legend cut off by the figure's edge, and a legend drawn over an axes' data area.
"""

from __future__ import annotations

from itertools import combinations

from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox

# Boxes may touch: a pixel of overlap from anti-aliased extents is not a collision.
TOLERANCE_PX = 1.0


def text_boxes(figure: Figure) -> list[tuple[str, Bbox]]:
    """Every non-empty text that a draw of ``figure`` paints (tick labels, axis labels,
    titles, legend entries, annotations), with its window extent at the figure's dpi: the
    texts are recorded as they are drawn, so ticks outside the view and hidden texts, which
    are never painted, are left out."""
    drawn: list[tuple[str, Bbox]] = []
    original = Text.draw

    def recording_draw(text: Text, renderer) -> None:
        original(text, renderer)
        if text.get_visible() and text.get_text().strip():
            box = text.get_window_extent(renderer)
            if box.width > 0 and box.height > 0:
                drawn.append((text.get_text().replace("\n", " | "), box))

    Text.draw = recording_draw
    try:
        figure.canvas.draw()
    finally:
        Text.draw = original
    return drawn


def _overlap(a: Bbox, b: Bbox) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE_PX
            and min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE_PX)


def _inside(box: Bbox, frame: Bbox) -> bool:
    return (box.x0 >= frame.x0 - TOLERANCE_PX and box.y0 >= frame.y0 - TOLERANCE_PX
            and box.x1 <= frame.x1 + TOLERANCE_PX and box.y1 <= frame.y1 + TOLERANCE_PX)


def layout_faults(figure: Figure) -> list[str]:
    boxes = text_boxes(figure)
    renderer = figure.canvas.get_renderer()
    frame = figure.bbox
    faults = [f"texts overlap: {a!r} and {b!r}"
                for (a, box_a), (b, box_b) in combinations(boxes, 2) if _overlap(box_a, box_b)]
    faults += [f"text cut off by the figure's edge: {name!r}"
                 for name, box in boxes if not _inside(box, frame)]
    legends = [artist for artist in figure.findobj(Legend) if artist.get_visible()]
    for legend in legends:
        box = legend.get_window_extent(renderer)
        if not _inside(box, frame):
            faults.append("legend cut off by the figure's edge")
        for axis in figure.axes:
            if axis.get_visible() and _overlap(box, axis.get_window_extent(renderer)):
                faults.append(f"legend drawn over the data of axes {axis.get_label() or ''}"
                                f"{axis.get_xlabel()!r} / {axis.get_ylabel()!r}")
    return faults
