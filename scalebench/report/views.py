"""The report's figures, drawn with matplotlib (Agg) from the merged rows.

Each view returns ``View`` (title, figure, the rows it compares, a note) or a reason why it
is not shown (the columns it needs are missing, or nothing to compare), so short runs and
files without optional columns never fail the report. Resource axes come from the measured
provenance (``prov_world_size``), never from the requested resources.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from scalebench.report.data import EXPERIMENT, Results, configuration_columns  # noqa: E402

QUALITY = (("objective_psnr_db", "PSNR (dB)"), ("objective_ssim", "SSIM"),
           ("objective_asinh_psnr_db", "asinh-PSNR (dB)"))
STEPS = ("grad", "denoise")
WORLD = "prov_world_size"
# Parameters whose growth is more work, and the power the work grows with: counts of views,
# frames, time steps, channels or patches grow it linearly, image and patch sides
# quadratically (2D pixels). Seeds and noise levels are not work.
WORK_PARAMETERS = {"p_dataset_num_angles": 1, "p_dataset_num_frames": 1,
                   "p_dataset_num_projections": 1, "p_dataset_num_times": 1,
                   "p_dataset_num_channels": 1, "p_dataset_image_size": 2,
                   "p_solver_batch_size": 1, "p_solver_patch_size": 2}


@dataclass
class View:
    slug: str  # file name of its PNG
    title: str
    figure: Figure | None
    rows: pd.DataFrame | None = None  # the rows the figure compares (environment check)
    note: str = ""  # what is plotted, or why nothing is


def _skip(slug: str, title: str, reason: str) -> View:
    return View(slug, title, None, None, reason)


def wrap(label: str) -> str:
    return "\n".join(textwrap.wrap(label, 48))


def measured(rows: pd.DataFrame, base: str) -> str | None:
    """The column of a per-step figure: its maximum over ranks when recorded, else rank 0's."""
    for name in (f"{base}_max", base):
        if name in rows and rows[name].notna().any():
            return name
    return None


def per_experiment(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per experiment: its first row's parameters and provenance, with the mean of
    every measured figure (objective_*) over its iterations (stop_val > 0) and its time per
    iteration (benchopt's solver time at the last row over the iterations done)."""
    first = rows.groupby(EXPERIMENT, sort=False).first()
    iterations = rows[rows["stop_val"] > 0]
    numeric = [c for c in iterations.select_dtypes("number").columns
               if c.startswith("objective_")]
    means = iterations.groupby(EXPERIMENT, sort=False)[list(numeric)].mean()
    table = first.drop(columns=[c for c in means.columns if c in first]).join(means)
    last = rows.sort_values("stop_val").groupby(EXPERIMENT, sort=False).last()
    done = last["stop_val"].where(last["stop_val"] > 0)
    table["time_per_iteration_s"] = (last["time"] / done) if "time" in last else float("nan")
    for column in table.columns:  # peaks: the largest over the run, not the mean
        if "peak" in column and column in rows:
            table[column] = rows.groupby(EXPERIMENT, sort=False)[column].max()
    return table


def quality(results: Results) -> View:
    rows = results.rows
    metrics = [(c, name) for c, name in QUALITY if c in rows and rows[c].notna().any()]
    if not metrics:
        return _skip("quality", "Quality", "no quality column (objective_psnr_db, ...)")
    axes_x = [("stop_val", "iteration")] + ([("time", "solver time (s)")] if "time" in rows
                                          else [])
    figure, axes = plt.subplots(len(axes_x), len(metrics), squeeze=False,
                                figsize=(4.2 * len(metrics), 3.2 * len(axes_x)))
    random = random_weight_experiments(rows)
    for experiment, part in rows.groupby(EXPERIMENT, sort=False):
        part = part.sort_values("stop_val")
        label = results.labels[experiment] + (RANDOM_MARK if experiment in random else "")
        for i, (x, _) in enumerate(axes_x):
            for j, (metric, _) in enumerate(metrics):
                axes[i][j].plot(part[x], part[metric], marker="o", markersize=3, label=label,
                                linestyle="--" if experiment in random else "-")
    for i, (_, x_name) in enumerate(axes_x):
        for j, (_, name) in enumerate(metrics):
            axes[i][j].set(xlabel=x_name, ylabel=name)
            axes[i][j].grid(alpha=0.3)
    _legend(figure, axes[0][0])
    note = "one line per experiment; iteration 0 is the initial estimate"
    if random:
        note += (f"; dashed{RANDOM_MARK}: {len(random)} experiment(s) ran a learned denoiser "
                 f"with random weights (pretrained: none), their quality says nothing about "
                 f"the method")
    return View("quality", "Quality vs iteration and vs time", figure, rows, note)


RANDOM_MARK = " [random weights]"


def random_weight_experiments(rows: pd.DataFrame) -> set[str]:
    """Experiments whose learned denoiser ran with random weights (prov_weights 'random')."""
    if "prov_weights" not in rows:
        return set()
    return set(rows.loc[rows["prov_weights"] == "random", EXPERIMENT])


def _legend(figure: Figure, axis) -> None:
    handles, labels = axis.get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="lower center", fontsize=7,
                      ncol=min(2, len(labels)), bbox_to_anchor=(0.5, 0.0))
        figure.tight_layout(rect=(0, 0.06 + 0.03 * ((len(labels) + 1) // 2), 1, 1))


def step_breakdown(results: Results) -> View:
    table = per_experiment(results.rows)
    parts = {}
    for step in STEPS:
        time, comm = measured(table, f"objective_{step}_time_s"), \
            measured(table, f"objective_{step}_comm_time_s")
        if time is None:
            continue
        communication = table[comm].fillna(0.0) if comm else 0.0
        parts[f"{step} (compute)"] = (table[time] - communication).clip(lower=0)
        if comm:
            parts[f"{step} (communication)"] = communication
    if not parts:
        return _skip("steps", "Per-step time", "no per-step time column "
                     "(objective_grad_time_s, objective_denoise_time_s)")
    frame = pd.DataFrame(parts).fillna(0.0)
    frame.index = [wrap(results.labels[e]) for e in frame.index]
    figure, axis = plt.subplots(figsize=(10, 1.4 + 0.6 * len(frame)))
    frame.plot.barh(stacked=True, ax=axis, width=0.7)
    axis.set(xlabel="seconds per iteration (mean; maximum over ranks)", ylabel="")
    axis.invert_yaxis()
    axis.legend(fontsize=8)
    axis.tick_params(axis="y", labelsize=7)
    figure.tight_layout()
    return View("steps", "Per-step time: gradient, denoiser, communication", figure,
                results.rows, "communication is the time inside collectives, counted in its step")


def memory(results: Results) -> View:
    table = per_experiment(results.rows)
    peaks = [c for base in ("host_rss", "cuda_alloc") for step in STEPS
             for c in [measured(table, f"objective_{step}_peak_{base}_mib")] if c]
    if not peaks or "p_dataset_image_size" not in table:
        return _skip("memory", "Peak memory vs problem size", "needs peak-memory columns and "
                     "p_dataset_image_size")
    series = configuration_columns(results.rows, ("p_dataset_image_size",))
    figure, axis = plt.subplots(figsize=(7, 4))
    for kind in ("host_rss", "cuda_alloc"):
        columns = [c for c in peaks if kind in c]
        if not columns:
            continue
        table[f"peak_{kind}"] = table[columns].max(axis=1)
        for _, group in table.groupby([c for c in series if c in table] or [WORLD],
                                      dropna=False, sort=False):
            group = group.sort_values("p_dataset_image_size")
            label = results.labels[group.index[0]].split(" image_size=")[0]
            axis.plot(group["p_dataset_image_size"] ** 2, group[f"peak_{kind}"],
                      marker="o", linestyle="-" if kind == "host_rss" else "--",
                      label=f"{label} ({'host' if kind == 'host_rss' else 'GPU'})")
    axis.set(xscale="log", xlabel="image pixels (image_size²)", ylabel="peak memory (MiB)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    return View("memory", "Peak memory vs problem size", figure, results.rows,
                "largest peak of any step and any rank over the run")


def _series(table: pd.DataFrame, leave_out: tuple[str, ...], rows: pd.DataFrame):
    """Experiments grouped by configuration without resources and ``leave_out``."""
    keys = [c for c in configuration_columns(rows, leave_out) if c in table]
    if not keys:
        return [("", table)]
    return list(table.groupby(keys, dropna=False, sort=False))


def strong_scaling(results: Results) -> View:
    table = per_experiment(results.rows)
    if WORLD not in table or table["time_per_iteration_s"].isna().all():
        return _skip("strong_scaling", "Strong scaling", "needs prov_world_size and timed "
                     "iterations")
    curves = []
    for _, group in _series(table, (), results.rows):
        group = group.dropna(subset=["time_per_iteration_s"]).sort_values(WORLD)
        by_ranks = group.groupby(WORLD)["time_per_iteration_s"].min()
        if len(by_ranks) >= 2:
            curves.append((group, by_ranks))
    if not curves:
        return _skip("strong_scaling", "Strong scaling", "no configuration was measured on "
                     "two or more world sizes")
    figure, (speed, efficiency) = plt.subplots(1, 2, figsize=(10, 4))
    compared = []
    for group, by_ranks in curves:
        base_ranks, base_time = by_ranks.index[0], by_ranks.iloc[0]
        speedup = base_time / by_ranks
        label = results.labels[group.index[0]]
        speed.plot(by_ranks.index, speedup, marker="o", label=label)
        efficiency.plot(by_ranks.index, speedup * base_ranks / by_ranks.index, marker="o",
                        label=label)
        compared.append(results.rows[results.rows[EXPERIMENT].isin(group.index)])
    top = max(by_ranks.index.max() for _, by_ranks in curves)
    low = min(by_ranks.index.min() for _, by_ranks in curves)
    speed.plot([low, top], [1, top / low], color="grey", linestyle=":", label="ideal")
    speed.set(xlabel="ranks (measured world size)", ylabel=f"speedup vs {low} rank(s)")
    efficiency.set(xlabel="ranks (measured world size)", ylabel="parallel efficiency",
                   ylim=(0, 1.15))
    for axis in (speed, efficiency):
        axis.grid(alpha=0.3)
    speed.legend(fontsize=7)
    figure.tight_layout()
    return View("strong_scaling", "Strong scaling: speedup and parallel efficiency", figure,
                pd.concat(compared), "time per iteration of the same configuration on each "
                "world size; efficiency = speedup x base ranks / ranks")


def weak_scaling(results: Results) -> View:
    table = per_experiment(results.rows)
    if WORLD not in table or table["time_per_iteration_s"].isna().all():
        return _skip("weak_scaling", "Weak scaling", "needs prov_world_size and timed "
                     "iterations")
    figure, axis = plt.subplots(figsize=(7, 4))
    compared = []
    sizes = [c for c in WORK_PARAMETERS if c in table and table[c].nunique() > 1]
    for size in sizes:
        for _, group in _series(table, (size,), results.rows):
            work = group[size].astype(float) ** WORK_PARAMETERS[size] / group[WORLD]
            for per_rank, series in group.groupby(work):
                by_ranks = series.groupby(WORLD)["time_per_iteration_s"].min().dropna()
                if len(by_ranks) < 2:
                    continue
                axis.plot(by_ranks.index, by_ranks.iloc[0] / by_ranks, marker="o",
                          label=f"{size.removeprefix('p_dataset_')}/rank = {per_rank:g}")
                compared.append(results.rows[results.rows[EXPERIMENT].isin(series.index)])
    if not compared:
        plt.close(figure)
        return _skip("weak_scaling", "Weak scaling", "no series with the same work per rank "
                     "(views, frames, batch or pixels / world size) on two or more world "
                     "sizes")
    axis.set(xlabel="ranks (measured world size)", ylabel="weak-scaling efficiency",
             ylim=(0, 1.15))
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    return View("weak_scaling", "Weak scaling efficiency", figure, pd.concat(compared),
                "efficiency = time per iteration on the fewest ranks / time on N ranks, at "
                "constant work per rank (a count, or a side squared, over the ranks)")


def compile_speedup(results: Results) -> View:
    table = per_experiment(results.rows)
    denoise = measured(table, "objective_denoise_time_s")
    if "p_solver_compile" not in table or denoise is None:
        return _skip("compile", "Compile speedup", "needs p_solver_compile and denoiser times")
    bars, compared = {}, []
    for _, group in _series(table, ("p_solver_compile",), results.rows):
        plain = group[group["p_solver_compile"] == False][denoise]  # noqa: E712
        compiled = group[group["p_solver_compile"] == True][denoise]  # noqa: E712
        if len(plain) and len(compiled):
            label = wrap(results.labels[compiled.index[0]].replace(" compile=True", ""))
            bars[label] = plain.iloc[0] / compiled.iloc[0]
            compared.append(results.rows[results.rows[EXPERIMENT].isin(group.index)])
    if not bars:
        return _skip("compile", "Compile speedup", "no configuration was run both with and "
                     "without compile")
    figure, axis = plt.subplots(figsize=(8, 1.2 + 0.45 * len(bars)))
    axis.barh(list(bars), list(bars.values()), color="tab:green")
    axis.axvline(1.0, color="grey", linestyle=":")
    axis.set(xlabel="denoiser step: time without compile / time with compile")
    axis.tick_params(axis="y", labelsize=7)
    figure.tight_layout()
    return View("compile", "Compile speedup of the denoiser step", figure, pd.concat(compared),
                "compilation time itself is set-up (objective_compile_time_s), not counted")


def training(results: Results) -> View:
    """Throughput, and its trade-off with memory under checkpointing (training results)."""
    rows = results.rows
    throughput = next((c for c in rows.columns if "throughput" in c
                       and pd.api.types.is_numeric_dtype(rows[c])), None)
    if throughput is None:
        return _skip("training", "Training throughput", "no training results (no throughput "
                     "column)")
    table = per_experiment(rows)
    # The mode that ran ('auto' resolves to one), and what a step itself needs: its peak
    # increase on the device when measured there, else on the host.
    checkpointing = next((c for c in ("objective_checkpointing_used", "p_solver_checkpointing")
                          if c in table), None)
    peak = next(filter(None, (measured(table, f"objective_step_peak_increase_{kind}")
                              for kind in ("cuda_alloc_mib", "host_rss_mib"))), None)
    panels = 2 if checkpointing and peak else 1
    figure, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    labels = [wrap(results.labels[e]) for e in table.index]
    axes[0][0].barh(labels, table[throughput])
    axes[0][0].set(xlabel=throughput)
    axes[0][0].tick_params(axis="y", labelsize=7)
    if panels == 2:
        for value, group in table.groupby(checkpointing, dropna=False):
            axes[0][1].scatter(group[peak], group[throughput], label=f"{checkpointing}={value}")
        axes[0][1].set(xlabel=peak, ylabel=throughput)
        axes[0][1].legend(fontsize=7)
    figure.tight_layout()
    return View("training", "Training throughput and checkpointing trade-off", figure, rows)


VIEWS = (quality, step_breakdown, memory, strong_scaling, weak_scaling, compile_speedup,
         training)


def all_views(results: Results) -> list[View]:
    return [view(results) for view in VIEWS]
