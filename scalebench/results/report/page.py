"""The report as one self-contained HTML page: no script, no stylesheet, font or image from
anywhere else; every figure and image is a PNG inside the page (data: URI), so the page opens
offline and archived copies stay readable."""

from __future__ import annotations

import base64
import html
from datetime import UTC, datetime
from pathlib import Path

from scalebench.results.report.data import (
    RUN_FIELDS,
    Results,
    environment_groups,
    headline_metric,
    mixed_environment,
    run_resources,
)
from scalebench.results.report.figures import View
from scalebench.results.report.summary import (
    best_quality_lines,
    stopped_early_line,
    tuned_lines,
)

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
td { overflow-wrap: anywhere; }
table.summary { max-width: 100%; }
table.summary td:first-child { min-width: 16em; }
table.summary td + td { text-align: right; overflow-wrap: normal; }
.warning { background: #fff3cd; border: 1px solid #e0a800; padding: 0.5em; margin: 0.5em 0; }
.note { color: #555; font-size: 0.85em; }
img.figure { max-width: 100%; }
figure.estimate { display: inline-block; margin: 0.3em; text-align: center; font-size: 0.8em; }
figure.estimate img { width: 220px; image-rendering: pixelated; }
"""


def png_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def _escape(value) -> str:
    return html.escape(str(value))


def _table(header: list[str], rows: list[list], css_class: str = "") -> str:
    head = "".join(f"<th>{_escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_escape(v)}</td>" for v in row) + "</tr>"
                   for row in rows)
    attribute = f' class="{css_class}"' if css_class else ""
    return f"<table{attribute}><tr>{head}</tr>{body}</table>"


def environment_warning(view: View) -> str:
    differences = mixed_environment(view.rows) if view.rows is not None else {}
    if not differences:
        return ""
    items = "; ".join(f"{name.removeprefix('prov_')}: {', '.join(values)}"
                      for name, values in differences.items())
    return (f'<div class="warning">Warning: this plot compares runs from different '
            f'environments ({_escape(items)}).</div>')


def _view_section(view: View, png: bytes) -> str:
    parts = [f"<h2>{_escape(view.title)}</h2>", environment_warning(view)]
    parts.append(f'<img class="figure" alt="{_escape(view.title)}" src="{png_uri(png)}">')
    if view.note:
        parts.append(f'<p class="note">{_escape(view.note)}.</p>')
    if view.summary is not None:
        parts.append(_table(view.summary.header, view.summary.rows, "summary"))
    return "\n".join(parts)


def _not_shown_section(views: list[View]) -> str:
    """The views these results give nothing to, each with why, in one closing list (a
    section each would bury the views that are shown)."""
    if not views:
        return ""
    items = "".join(f"<li>{_escape(view.title)}. Not shown: {_escape(view.note)}.</li>"
                    for view in views)
    return f'<h2>Views not shown</h2><ul class="note">{items}</ul>'


def _files_section(results: Results) -> str:
    rows = [[f["path"], f["rows"], f["status"],
             "; ".join(f"{x.get('label', x.get('experiment'))}: {x.get('error')}"
                       for x in f["failures"]) or "-"] for f in results.files]
    parts = ["<h2>Result files</h2>", _table(["file", "rows", "run status", "failures"], rows)]
    if results.dropped:
        parts.append(f'<div class="warning">{len(results.dropped)} duplicate run(s) '
                     f'dropped: identical runs (same config hash, repetition, world size and '
                     f'environment) keep the latest run.</div>')
        parts.append(_table(["run", "kept (file, run date)", "dropped (file, run date)"],
                            [[d["run"], f"{d['kept_file']} ({d['kept_date']})",
                              f"{d['dropped_file']} ({d['dropped_date']})"]
                             for d in results.dropped]))
    return "\n".join(parts)


def _images_section(found: list[dict]) -> str:
    if not found:
        return ('<h2>Images</h2><p class="note">Not shown: no run kept its estimates (solver '
                'parameter save_estimate: true).</p>')
    parts = ["<h2>Images: ground truth, initial and final estimate</h2>"]
    for item in found:
        parts.append(f"<h3>{_escape(item['label'])}</h3><div>")
        for name, path in item["images"].items():
            row = {"initial estimate": item["first"], "final estimate": item["last"]}.get(name)
            score = ""
            column, metric = headline_metric(item["first"]["dataset_name"])
            if row is not None and column in row:
                score = f", {metric} {row[column]:.2f} dB"
            parts.append(f'<figure class="estimate"><img alt="{_escape(name)}" '
                         f'src="{png_uri(Path(path).read_bytes())}"><figcaption>'
                         f'{_escape(name)}{_escape(score)}</figcaption></figure>')
        parts.append("</div>")
    return "\n".join(parts)


def _provenance_section(results: Results) -> str:
    groups = environment_groups(results)
    if not groups:
        return '<h2>Provenance</h2><p class="note">Not shown: no provenance columns.</p>'
    parts = ["<h2>Provenance</h2>"]
    if len(groups) > 1:
        parts.append(f'<div class="warning">These results come from {len(groups)} different '
                     f'environments (one table each).</div>')
    resources = [f for f in RUN_FIELDS if f in results.rows]
    for index, (fields, runs) in enumerate(groups, 1):
        parts.append(f"<h3>Environment {index} ({len(runs)} run(s))</h3>")
        parts.append(_table(["field", "value"],
                            [[k.removeprefix("prov_"), v] for k, v in fields.items()]))
        parts.append(_table(["run", *(f.removeprefix("prov_") for f in resources)],
                            [[results.labels[e], *run_resources(results, e).values()]
                             for e in runs]))
    return "\n".join(parts)


def render_page(results: Results, views: list[tuple[View, bytes | None]],
                images: list[dict]) -> str:
    created = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<h1>scalebench report</h1><p class='note'>{len(results.runs())} "
            f"run(s), {len(results.rows)} rows from {len(results.files)} file(s); "
            f"written {created}.</p>"]
    body += [f"<p><b>{_escape(line[0].upper() + line[1:])}.</b></p>"
             for line in filter(None, [*best_quality_lines(results.rows, results.per_image),
                                       stopped_early_line(results),
                                       *tuned_lines(results.files)])]
    body.append(_files_section(results))
    body += [_view_section(view, png) for view, png in views if png is not None]
    body += [_images_section(images), _provenance_section(results),
             _not_shown_section([view for view, png in views if png is None])]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>scalebench report</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
