"""The report's capacity view: how large a reconstruction fits, per configuration.

Its input is what ``scalebench capacity ... --format json`` prints (one answer per
configuration and rank count, ``CapacityLine``), given to ``scalebench report --capacity``.
Each answer gets a panel: the calibration probes' measured peaks (those of its refinement near
the answer marked apart), the model's predicted peak
against the size, the memory budget as a line, the largest fitting size marked (and its
measured peak when ``--verify`` ran it), and the peaks measured by the runs of these results
that have the configuration and rank count. Beside it, where the answer has a time model, the
time panel: the probes' measured seconds per iteration, the model's predicted seconds per
iteration and per run against the size, the time budget (``--time``), the answer and, with
``--verify``, its measured seconds per iteration.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from scalebench.errors import ScalebenchError, unreadable_file_error
from scalebench.results.report.data import (
    RUN,
    Results,
    parameter_text,
    per_run,
    step_peaks,
)
from scalebench.results.report.figures import (
    FIGURE_WIDTH,
    SMALL_FONT,
    Table,
    View,
    legend_below,
    legend_height,
    new_figure,
    number,
    skip,
    wrap,
)

# What a capacity answer must hold for the view
# (scalebench.planning.capacity.command.CapacityLine).
ANSWER_KEYS = ("label", "ranks", "size_parameter", "largest_size", "predicted_peak_bytes",
               "budget_bytes", "device", "configuration", "probes", "curve",
               "measured_peak_bytes", "calibration_sizes")
GIB = 2.0**30
MIB = 2.0**20
TITLE = "Capacity: peak memory and time vs size, models and budgets"


def load_capacity(paths: list[Path]) -> list[dict]:
    """The answers of capacity files (``scalebench capacity --format json`` output); a file
    that is not one is a one-line error naming it."""
    answers = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as error:
            raise unreadable_file_error(Path(path), "capacity file", error) from None
        except ValueError:
            data = None
        missing = _missing_keys(data)
        if missing:
            raise ScalebenchError(f"{path}: not a capacity file ({missing}); give what "
                                  f"`scalebench capacity CONFIG --memory M --format json` "
                                  f"prints")
        answers += data
    return answers


def _missing_keys(data) -> str:
    """Why ``data`` is not a list of capacity answers ('' when it is)."""
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        return "not a JSON list of answers"
    for item in data:
        absent = [key for key in ANSWER_KEYS if key not in item]
        if absent:
            return f"an answer has no '{absent[0]}'"
    return ""


def matching_runs(table: pd.DataFrame, answer: dict) -> pd.DataFrame:
    """The runs of ``table`` (``per_run``) of the answer's configuration (every parameter but
    the size, the device as the run resolved it) on its rank count."""
    configuration = answer["configuration"]
    keep = pd.Series(True, index=table.index)
    for prefix, owner in (("dataset", "dataset_name"), ("solver", "solver_name")):
        keep &= table[owner].astype(str).str.split("[").str[0] == configuration[prefix]
        for name, value in configuration[f"{prefix}_params"].items():
            column = f"p_{prefix}_{name}"
            if column not in table:
                continue
            given = table[column].map(lambda v: "None" if pd.isna(v) else parameter_text(v))
            wanted = parameter_text(value)
            keep &= (given == wanted) | ((given == "auto") if name == "device" else False)
    if "prov_world_size" in table:
        keep &= table["prov_world_size"] == answer["ranks"]
    return table[keep]


def _panel(axis, answer: dict, runs: pd.DataFrame) -> None:
    size = answer["size_parameter"]
    # [size, peak, chunks cut, refinement probe] (files written before refinement: three)
    near = [p for p in answer["probes"] if len(p) > 3 and p[3]]
    probes = [p for p in answer["probes"] if not p[2] and p not in near]
    cut = [p for p in answer["probes"] if p[2]]
    if answer["curve"]:
        axis.plot([c[0] for c in answer["curve"]], [c[1] / GIB for c in answer["curve"]],
                  color="C0", label="model: predicted peak")
    axis.scatter([p[0] for p in probes], [p[1] / GIB for p in probes], marker="o",
                 facecolors="none", edgecolors="C0", label="calibration probes (measured)")
    if cut:
        axis.scatter([p[0] for p in cut], [p[1] / GIB for p in cut], marker="^",
                     facecolors="none", edgecolors="C0",
                     label="probes with chunks cut (workspace term)")
    if near:
        axis.scatter([p[0] for p in near], [p[1] / GIB for p in near], marker="D",
                     color="C0", label="refinement probes, near the answer (measured)")
    peaks = step_peaks(runs)
    kind = "cuda_alloc" if answer["device"] == "cuda" else "host_rss"
    column = f"p_dataset_{size}"
    if kind in peaks and column in runs and len(runs):
        axis.scatter(runs[column], peaks[kind] * MIB / GIB, marker="s", color="C2",
                     label="runs of these results (step peaks)")
    axis.axhline(answer["budget_bytes"] / GIB, color="C3", linestyle="--",
                 label="memory budget (--memory)")
    if answer["largest_size"] is not None:
        axis.axvline(answer["largest_size"], color="C1", linestyle=":",
                     label="largest fitting size")
        axis.annotate(f"{size} {answer['largest_size']} ", (answer["largest_size"], 0.04),
                      xycoords=("data", "axes fraction"), ha="right", fontsize=SMALL_FONT,
                      color="C1")
        if answer["measured_peak_bytes"] is not None:
            axis.scatter([answer["largest_size"]], [answer["measured_peak_bytes"] / GIB],
                         marker="*", s=80, color="C1", label="largest size, measured (--verify)")
    axis.set_xscale("log")
    axis.set_ylim(0, 1.15 * max([answer["budget_bytes"], *(c[1] for c in answer["curve"]),
                                 *(p[1] for p in answer["probes"])]) / GIB)
    axis.set(xlabel=size, ylabel="peak per rank (GiB)")
    who = "1 rank" if answer["ranks"] == 1 else f"{answer['ranks']} ranks"
    axis.set_title(wrap(f"{answer['label']}, {who}", 110), fontsize=SMALL_FONT)
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(alpha=0.3)


def _time_panel(axis, answer: dict) -> None:
    """Seconds against the size: the probes' per iteration, the model's per iteration and
    per run, the time budget, the answer and its verified seconds per iteration."""
    size = answer["size_parameter"]
    axis.set(xlabel=size, ylabel="seconds (one rank)")
    axis.set_xscale("log")
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(alpha=0.3)
    if not answer.get("time_model"):
        axis.set_title("no time model (probes not timed)", fontsize=SMALL_FONT)
        return
    curve = answer["time_curve"]
    axis.plot([c[0] for c in curve], [c[2] for c in curve], color="C4",
              label="time model: s per iteration")
    axis.plot([c[0] for c in curve], [c[1] for c in curve], color="C5",
              label=f"time model: run ({answer['iterations']} iterations, set-up, evaluations)")
    probes = answer["time_probes"]
    axis.scatter([p[0] for p in probes], [p[1] for p in probes], marker="o",
                 facecolors="none", edgecolors="C4", label="probes: s per iteration (measured)")
    if answer.get("time_budget_s"):
        axis.axhline(answer["time_budget_s"], color="C3", linestyle="-.",
                     label="time budget (--time)")
    if answer["largest_size"] is not None:
        axis.axvline(answer["largest_size"], color="C1", linestyle=":")
        if answer.get("measured_iteration_s") is not None:
            axis.scatter([answer["largest_size"]], [answer["measured_iteration_s"]],
                         marker="*", s=80, color="C4",
                         label="largest size, s per iteration measured (--verify)")
    axis.set_yscale("log")
    laws = "; ".join(f"{term['name']}: {law_kind(term)}" for term in
                     answer["time_model"]["terms"])
    axis.set_title(wrap(laws, 80), fontsize=SMALL_FONT)


def law_kind(term: dict) -> str:
    """A time term's law kind (time_laws.TermFit.to_json()), with the mapped regime's law
    and where it starts when the term has one: 'linear; power law + constant from 3.1e+06
    (image mapped)'."""
    above = term.get("above")
    if above is None:
        return term["kind"]
    return f"{term['kind']}; {above['kind']} from {term['knee']:.2g} (image mapped)"


def _time_cells(answer: dict) -> list[str]:
    """The row's time cells: which budget binds, the laws, the seconds per iteration
    predicted and measured, the predicted run."""
    if not answer.get("time_model"):
        return ["-", "not calibrated", "-", "-", "-"]
    measured = answer.get("measured_iteration_s")
    predicted = answer.get("predicted_iteration_s")
    return [answer.get("binding") or "-",
            ", ".join(f"{term['name']} {law_kind(term)}" for term in
                      answer["time_model"]["terms"]),
            "-" if predicted is None else number(predicted, 3),
            "-" if measured is None else number(measured, 3),
            "-" if answer.get("predicted_run_s") is None
            else number(answer["predicted_run_s"], 3)]


def _row(answer: dict, runs: pd.DataFrame) -> list[str]:
    size = answer["size_parameter"]
    measured = answer["measured_peak_bytes"]
    ran = sorted(int(v) for v in runs[f"p_dataset_{size}"]) if f"p_dataset_{size}" in runs \
        else []
    return [answer["label"], str(answer["ranks"]),
            ", ".join(map(str, answer["calibration_sizes"])),
            number(answer["budget_bytes"] / GIB, 4),
            "-" if answer["largest_size"] is None else str(answer["largest_size"]),
            "-" if answer["predicted_peak_bytes"] is None
            else number(answer["predicted_peak_bytes"] / GIB, 4) +
            # CapacityLine.approximate (files written before it have none)
            (" (approximate)" if answer.get("approximate") else ""),
            "-" if measured is None else number(measured / GIB, 4),
            "-" if measured is None else number(answer["predicted_peak_bytes"] / measured, 3),
            ", ".join(map(str, ran)) or "-", *_time_cells(answer)]


def capacity(results: Results) -> View:
    """One panel per capacity answer given to the report."""
    if not results.capacity:
        return skip("capacity", TITLE, "no capacity file given (scalebench capacity CONFIG "
                    "--memory M --format json > F; scalebench report ... --capacity F)")
    answers = results.capacity
    table = per_run(results.rows)
    runs = [matching_runs(table, answer) for answer in answers]
    timed = any(answer.get("time_model") for answer in answers)
    width = FIGURE_WIDTH if timed else 8
    figure, axes = new_figure(width, 3.2 * len(answers) + legend_height(
        ["refinement probes, near the answer (measured)"] * 12, width), len(answers),
        2 if timed else 1)
    for row, answer, matched in zip(axes, answers, runs, strict=True):
        _panel(row[0], answer, matched)
        if timed:
            _time_panel(row[1], answer)
    # One legend for every panel: each kind of mark once, whichever panel drew it.
    handles = {}
    for axis in axes.flat:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    legend_below(figure, axes[0][0], handles)
    shown = {e for matched in runs for e in matched.index}
    rows = results.rows[results.rows[RUN].isin(shown)]
    return View("capacity", TITLE, figure, rows if len(rows) else None,
                "largest size whose predicted per-rank peak fits the budget (and whose "
                "predicted run fits the time budget), from memory and time models fitted to "
                "the same short runs in fresh processes (scalebench capacity); the runs' "
                "points are their largest step peak, the model's the whole run's",
                Table(["configuration", "ranks", "calibrated at", "budget (GiB)",
                       "largest size", "predicted (GiB)", "measured at it (GiB)",
                       "predicted / measured", "sizes run", "binds", "time model",
                       "predicted s / iteration", "measured s / iteration",
                       "predicted run (s)"],
                      [_row(a, r) for a, r in zip(answers, runs, strict=True)]))
