"""``scalebench report``: results files merged into one self-contained, offline HTML page.

Figures are drawn once with matplotlib and embedded as PNG (the same bytes are written by
``--png``); the page holds no script and loads nothing, so it opens on an offline node and
archives next to the results. Imports no torch.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from provenance.files import atomic_path
from scalebench.errors import ScalebenchError

if TYPE_CHECKING:
    from scalebench.results.report.figures import View

FIGURE_DPI = 110


def _png(view: View) -> bytes | None:
    if view.figure is None:
        return None
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    view.figure.savefig(buffer, format="png", dpi=FIGURE_DPI)
    plt.close(view.figure)
    return buffer.getvalue()


def _write_atomically(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as temporary:
            temporary.write_bytes(data)
    except OSError as error:
        raise ScalebenchError(f"cannot write {path}: {error.strerror or error}") from None


def write_report(paths: list[Path], output: Path, png_folder: Path | None = None,
                 capacity: list[Path] = (), per_image: bool = False) -> str:
    """Write the report of ``paths`` to ``output`` (and every figure into ``png_folder``),
    with the capacity view of the ``capacity`` files; return a one-line summary.
    ``per_image``: a configuration run on several images shown per image, not over them."""
    # Imported here: the package's modules that read results (data, summary) are imported by
    # the launcher's publish child after every experiment, which draws nothing (matplotlib:
    # about a second).
    from scalebench.results.report.capacity import load_capacity
    from scalebench.results.report.data import Results, estimate_images, load_results
    from scalebench.results.report.page import render_page
    from scalebench.results.report.views import all_views

    answers = load_capacity([Path(p) for p in capacity])
    results: Results = load_results([Path(p) for p in paths])
    results.capacity, results.per_image = answers, per_image
    views = [(view, _png(view)) for view in all_views(results)]
    _write_atomically(output, render_page(results, views, estimate_images(results)).encode())
    written = [view.slug for view, png in views if png is not None]
    if png_folder is not None:
        for view, png in views:
            if png is not None:
                _write_atomically(png_folder / f"{view.slug}.png", png)
    return (f"Report: {output} ({len(results.runs())} run(s) from "
            f"{len(results.files)} file(s); figures: {', '.join(written) or 'none'}; "
            f"{len(results.dropped)} duplicate(s) dropped)")


__all__ = ["write_report"]
