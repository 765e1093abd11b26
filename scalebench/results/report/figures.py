"""What every view of the report is made of: the ``View`` and its summary ``Table``, and
matplotlib figures laid out so that labels, titles and legends stay inside them and off the
data (checked from the drawn layout by tests/figure_layout.py)."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass
class View:
    slug: str  # file name of its PNG
    title: str
    figure: Figure | None
    rows: pd.DataFrame | None = None  # the rows the figure compares (environment check)
    note: str = ""  # what is plotted, or why nothing is
    summary: Table | None = None  # the figures the plot shows, as a short table


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


def skip(slug: str, title: str, reason: str) -> View:
    return View(slug, title, None, None, reason)


# Label endings kept on one line: "4 ranks", "rep 1".
UNBROKEN = re.compile(r"(\d+) (ranks)$|(rep) (\d+)")


def wrap(label: str, width: int = 48) -> str:
    kept = UNBROKEN.sub(lambda m: "\xa0".join(filter(None, m.groups())), label)
    return "\n".join(textwrap.wrap(kept, width)).replace("\xa0", " ")


def number(value, digits: int = 3) -> str:
    """A measured figure for a table: ``digits`` significant digits, '-' when missing."""
    if value is None or pd.isna(value):
        return "-"
    return f"{float(value):.{digits}g}"


# Figure text: tick labels and legends at this size (points); figures are at most
# FIGURE_WIDTH inches wide, the page's width at the report's resolution.
SMALL_FONT = 7
FIGURE_WIDTH = 10.0
LINE_HEIGHT_IN = 1.3 * SMALL_FONT / 72  # one line of small text


def new_figure(width: float, height: float, rows: int = 1, columns: int = 1):
    """A figure whose layout engine keeps labels, titles and outside legends inside it.
    matplotlib is imported here, not with the module: what reads results and writes text
    (the launcher's publish child, after every experiment) draws nothing."""
    import matplotlib

    matplotlib.use("Agg")  # no display: figures are saved as PNG
    import matplotlib.pyplot as plt

    return plt.subplots(rows, columns, squeeze=False, figsize=(width, height),
                        layout="constrained")


def _legend_columns(labels: list[str], width: float) -> int:
    """Columns of a legend below the plots: as many as the widest entry lets fit."""
    widest = max(len(line) for label in labels for line in label.split("\n"))
    column_in = (widest * 0.6 * SMALL_FONT + 40) / 72  # text, handle and spacing
    return max(1, min(len(labels), int(0.95 * width / column_in)))


def legend_height(labels: list[str], width: float) -> float:
    """Inches a legend of ``labels`` takes below the plots of a ``width``-inch figure."""
    columns = _legend_columns(labels, width)
    lines = max(label.count("\n") + 1 for label in labels)
    return 0.25 + -(-len(labels) // columns) * lines * LINE_HEIGHT_IN * 1.45


def legend_below(figure: Figure, axis, handles: dict | None = None) -> None:
    """The legend of ``axis``'s lines (or of ``handles``, label -> artist) below every plot
    of ``figure``, never over the data."""
    if handles is None:
        artists, labels = axis.get_legend_handles_labels()
    else:
        artists, labels = list(handles.values()), list(handles)
    if artists:
        width = figure.get_figwidth()
        figure.legend(artists, labels, loc="outside lower center", fontsize=SMALL_FONT,
                      ncol=_legend_columns(labels, width), frameon=False)


def headroom(values: pd.Series) -> float | None:
    """The top of an axis from 0: a tenth above the largest value (None: matplotlib's own
    choice, when there is nothing positive to show)."""
    top = values.max()
    return float(top) * 1.1 if pd.notna(top) and top > 0 else None


def bar_height(labels: list[str]) -> float:
    """Inches per bar: room for its (wrapped) label's lines."""
    lines = max(label.count("\n") + 1 for label in labels)
    return max(0.3, lines * LINE_HEIGHT_IN * 1.25 + 0.08)
