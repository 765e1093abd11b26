"""The report's figures, drawn with matplotlib (Agg) from the merged rows.

Each view returns ``View`` (title, figure, the rows it compares, a note) or a reason why it
is not shown (the columns it needs are missing, or nothing to compare), so short runs and
files without optional columns never fail the report. Resource axes come from the measured
provenance (``prov_world_size``), never from the requested resources.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.ticker import MaxNLocator

from provenance.stop_reasons import EARLY_WORDING
from scalebench.rank.names import QUALITY_METRICS, metric_column
from scalebench.results.report.capacity import capacity
from scalebench.results.report.data import (
    RANDOM_MARK,
    RUN,
    Results,
    beats_blank_sky,
    configuration_columns,
    headline_metric,
    measured,
    parameter_text,
    per_run,
    random_weight_experiments,
    run_labels,
    step_peaks,
)
from scalebench.results.report.denoiser import standalone_denoiser
from scalebench.results.report.environments_view import environments
from scalebench.results.report.figures import (
    FIGURE_WIDTH,
    SMALL_FONT,
    Table,
    View,
    bar_height,
    headroom,
    legend_below,
    legend_height,
    new_figure,
    number,
    skip,
    wrap,
)
from scalebench.results.report.methods import methods, reconstructions
from scalebench.results.report.order import WORLD, reading_order
from scalebench.results.report.repetitions import (
    draw_ranges,
    draw_time_band,
    range_text,
    repetitions,
    series_of,
    time_bands,
)
from scalebench.results.report.scaling import (
    configurations,
    strong_scaling,
    weak_scaling,
)
from scalebench.results.report.steps import step_breakdown
from scalebench.results.report.training import training
from scalebench.results.report.tuned import tuned_best
from scalebench.results.stops import stop_of

# Plotted quality metrics (MSE left out: PSNR shows it on a log scale), PSNR and SNR first.
QUALITY = tuple((metric_column(name), QUALITY_METRICS[name])
                for name in ("psnr_db", "snr_db", "ssim", "asinh_psnr_db"))


def line_styles(results: Results) -> dict[str, dict]:
    """Per run: a colour per configuration and a line style per world size, so the
    runs of one configuration on several rank counts read as one family."""
    configurations = run_labels(results.rows, (WORLD,))
    colours = {name: f"C{i % 10}" for i, name in enumerate(dict.fromkeys(
        configurations.values()))}
    first = results.rows.groupby(RUN, sort=False).first()
    worlds = sorted(first[WORLD].dropna().unique()) if WORLD in first else []
    dashes = ("-", "--", ":", "-.")
    return {e: {"color": colours[configurations[e]],
                "linestyle": dashes[worlds.index(first.loc[e, WORLD]) % len(dashes)]
                if worlds and pd.notna(first.loc[e, WORLD]) else "-"}
            for e in first.index}


def iterations_text(run: pd.DataFrame) -> str:
    """A run's last iteration, and for one that ended before its max_iter, how ('1 of 4, cut
    by its time limit'): a cut run is not shown as a complete one."""
    stop = stop_of(run)
    last = parameter_text(run["stop_val"].max())
    if not stop.early:
        return last
    how = EARLY_WORDING[stop.reason]
    return f"{last} of {stop.max_iter}, {how}" if stop.max_iter is not None else f"{last}, {how}"


def quality(results: Results) -> View:
    # The standalone denoiser denoises the noisy truth, another task: its own view.
    rows = reconstructions(results.rows)
    if rows.empty:
        return skip("quality", "Quality", "no reconstruction run (the standalone denoiser has "
                    "its own view)")
    headline_columns = {headline_metric(name)[0] for name in rows["dataset_name"].unique()}
    metrics = sorted([(c, name) for c, name in QUALITY if c in rows and rows[c].notna().any()],
                     key=lambda metric: metric[0] not in headline_columns)  # headlines first
    if not metrics:
        return skip("quality", "Quality", "no quality column (objective_psnr_db, ...)")
    axes_x = [("stop_val", "iteration")] + ([("time", "solver time (s)")] if "time" in rows
                                          else [])
    random = random_weight_experiments(rows)
    labels = [wrap(results.labels[e] + (RANDOM_MARK if e in random else ""), 60)
              for e in dict.fromkeys(rows[RUN])]
    width = min(FIGURE_WIDTH, 3.4 * len(metrics))
    figure, axes = new_figure(width, 2.6 * len(axes_x) + legend_height(labels, width),
                           len(axes_x), len(metrics))
    summary = []
    styles = line_styles(results)
    parts = dict(list(rows.groupby(RUN, sort=False)))
    blank_sky = beats_blank_sky(rows)
    bands = {metric: time_bands(rows, metric) if "time" in rows else {} for metric, _ in metrics}
    for run in reading_order(per_run(rows), rows).index:
        part = parts[run].sort_values("stop_val")
        label = results.labels[run] + (RANDOM_MARK if run in random else "")
        for i, (x, _) in enumerate(axes_x):
            for j, (metric, _) in enumerate(metrics):
                if x == "time" and run in bands[metric]:  # repetitions: median and band
                    if bands[metric][run] is not None:
                        draw_time_band(axes[i][j], bands[metric][run], metric, **styles[run])
                    continue
                axes[i][j].plot(part[x], part[metric], marker="o", markersize=3,
                                label=wrap(label, 60), **styles[run],
                                markerfacecolor="none" if run in random else None)
        summary.append([label, iterations_text(part),
                        *(number(part[metric].iloc[k], 4) for metric, _ in metrics
                          for k in (0, -1)),
                        *([("yes" if blank_sky[run] else "no") if run in blank_sky else "-"]
                          if not blank_sky.empty else [])])
    for i, (_, x_name) in enumerate(axes_x):
        for j, (_, name) in enumerate(metrics):
            axes[i][j].set(xlabel=x_name, ylabel=name)
            axes[i][j].grid(alpha=0.3)
            axes[i][j].tick_params(labelsize=SMALL_FONT)
            if x_name == "iteration":
                axes[i][j].xaxis.set_major_locator(MaxNLocator(integer=True))
    legend_below(figure, axes[0][0])
    header = ["run", "iterations", *(f"{name} {when}" for _, name in metrics
                                             for when in ("initial", "final")),
              *(["beats a blank sky (final SNR > 0 dB)"] if not blank_sky.empty else [])]
    headlines = sorted({headline_metric(name)[1] for name in rows["dataset_name"].unique()})
    note = (f"one line per run (against time, the repetitions of a run as their median, with a "
            f"band from the fastest to the slowest); iteration 0 is the initial estimate; "
            f"headline metric: "
            f"{' and '.join(headlines)}")
    if "objective_snr_db" in headline_columns:
        note += " (radio interferometry: SNR, which a blank sky cannot win)"
    if random:
        note += (f"; open markers{RANDOM_MARK}: {len(random)} run(s) ran a learned "
                 f"denoiser with random weights (pretrained: none), their quality says nothing "
                 f"about the method")
    return View("quality", "Quality vs iteration and vs time", figure, rows, note,
                Table(header, summary))


def _pixels_axis(axis, pixels: pd.Series) -> None:
    """Pixels on a linear axis from 0, or a log axis when the sizes span a decade or more."""
    if pixels.max() >= 10 * pixels.min():
        axis.set_xscale("log")
    else:
        axis.set_xlim(0, pixels.max() * 1.1)


def memory(results: Results) -> View:
    table = reading_order(per_run(results.rows), results.rows)
    kinds = step_peaks(table)
    if not kinds or "p_dataset_image_size" not in table:
        return skip("memory", "Peak memory vs problem size", "needs peak-memory columns and "
                    "p_dataset_image_size")
    for kind, peak in kinds.items():
        table[f"peak_{kind}"] = peak
    # One line per configuration and world size: the image size is the axis.
    series = [c for c in configuration_columns(results.rows, ("p_dataset_image_size",))
              if c in table] + [c for c in (WORLD,) if c in table]
    names = run_labels(results.rows, ("p_dataset_image_size",))
    groups = list(table.groupby(series, dropna=False, sort=False)) if series else [("", table)]
    where = {"host_rss": "host", "cuda_alloc": "GPU"}
    labels = [wrap(f"{names[group.index[0]]} ({where[kind]})", 60) for kind in kinds
              for _, group in groups]
    figure, axes = new_figure(8, 3.6 + legend_height(labels, 8))
    axis = axes[0][0]
    styles = line_styles(results)
    for kind in kinds:
        for _, group in groups:
            group = group.sort_values("p_dataset_image_size")
            axis.plot(group["p_dataset_image_size"] ** 2, group[f"peak_{kind}"],
                      marker="o" if kind == "host_rss" else "s", **styles[group.index[0]],
                      label=wrap(f"{names[group.index[0]]} ({where[kind]})", 60))
    _pixels_axis(axis, table["p_dataset_image_size"] ** 2)
    axis.set_ylim(0, headroom(pd.concat([table[f"peak_{kind}"] for kind in kinds])))
    axis.set(xlabel="image pixels (image_size²)", ylabel="peak memory (MiB)")
    axis.tick_params(labelsize=SMALL_FONT)
    axis.grid(alpha=0.3)
    legend_below(figure, axis)
    summary = [[results.labels[e], parameter_text(row["p_dataset_image_size"]),
                *(number(row[f"peak_{kind}"], 5) for kind in kinds)]
               for e, row in table.iterrows()]
    return View("memory", "Peak memory vs problem size", figure, results.rows,
                "largest peak of any step and any rank over the run",
                Table(["run", "image_size", *(f"peak {where[kind]} memory (MiB)"
                                                     for kind in kinds)], summary))


def compile_speedup(results: Results) -> View:
    table = per_run(results.rows)
    denoise = measured(table, "objective_denoise_time_s")
    if "p_solver_compile" not in table or denoise is None:
        return skip("compile", "Compile speedup", "needs p_solver_compile and denoiser times")
    spread = repetitions(table, [denoise])
    series = spread.first.assign(median=spread.median[denoise], low=spread.low[denoise],
                                 high=spread.high[denoise], count=spread.count)
    names = run_labels(results.rows, ("p_solver_compile", "idx_rep"))
    pairs = []  # (name, without compile, with compile): the first series of each side
    for _, group in configurations(series, ("p_solver_compile",), results.rows):
        for _, same in group.groupby(WORLD, dropna=False, sort=False) if WORLD in group \
                else [("", group)]:
            plain = same[same["p_solver_compile"] == False]  # noqa: E712
            compiled = same[same["p_solver_compile"] == True]  # noqa: E712
            if len(plain) and len(compiled):
                pairs.append((names[compiled.index[0]], plain.iloc[0], compiled.iloc[0]))
    if not pairs:
        return skip("compile", "Compile speedup", "no configuration was run both with and "
                     "without compile")
    # The speedup's range: the slowest plain over the fastest compiled repetition, and back.
    speedups = pd.DataFrame([{"median": plain["median"] / compiled["median"],
                              "low": plain["low"] / compiled["high"],
                              "high": plain["high"] / compiled["low"],
                              "count": max(plain["count"], compiled["count"])}
                             for _, plain, compiled in pairs], index=[wrap(n) for n, _, _ in pairs])
    figure, axes = new_figure(8, 0.9 + bar_height(list(speedups.index)) * len(pairs))
    axis = axes[0][0]
    rows = range(len(pairs))
    axis.barh(rows, speedups["median"], color="tab:green", height=0.7)
    axis.set_yticks(rows, list(speedups.index))
    draw_ranges(axis, rows, speedups["median"], speedups["low"], speedups["high"],
                speedups["count"])
    axis.axvline(1.0, color="grey", linestyle=":")
    axis.set(xlabel="denoiser step: time without compile / time with compile (medians over "
             "repetitions)")
    axis.invert_yaxis()
    axis.tick_params(labelsize=SMALL_FONT)
    summary = [[name, *(range_text(side["median"], side["low"], side["high"], side["count"])
                        for side in (plain, compiled, speedup))]
               for (name, plain, compiled), (_, speedup) in zip(pairs, speedups.iterrows(),
                                                                 strict=True)]
    compared = results.rows[series_of(results.rows[RUN]).isin(set(series_of(pd.Series(
        [run for _, plain, compiled in pairs for run in (plain.name, compiled.name)]))))]
    return View("compile", "Compile speedup of the denoiser step", figure, compared,
                "compilation time itself is set-up (objective_compile_time_s), not counted; "
                "speedup: the median without compile over the median with it, its bar from "
                "the slowest repetition without over the fastest with, and back",
                Table(["configuration", "denoiser step without compile (s)",
                       "with compile (s)", "speedup"], summary))


VIEWS = (quality, methods, tuned_best, step_breakdown, standalone_denoiser, memory, capacity,
         strong_scaling, weak_scaling, compile_speedup, training,
         environments)


def all_views(results: Results) -> list[View]:
    return [view(results) for view in VIEWS]
