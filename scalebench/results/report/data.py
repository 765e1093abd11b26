"""Results files merged for the report: deduplicated runs, labels and environments.

Files are read with ``provenance.results.read_results`` (never unpickles; a file that is not
a results file raises ``UnreadableResults``). A run is a config hash and a repetition
(``prov_config_hash``, ``idx_rep``; benchopt's solver and dataset names where provenance is
missing); when several files hold the same run, the latest run (``run_date``, else the
later file on the command line) is kept and the others are listed as dropped.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from provenance.environment import (
    ENVIRONMENT_FIELDS,
    RESOURCE_FIELDS,
    differing_fields,
    environment_key,
    environment_labels,
)
from provenance.results import read_results
from provenance.schema import column as prov_column
from scalebench.benchmarks import problem_spec
from scalebench.problems.spec import DEFAULT_HEADLINE
from scalebench.rank.names import INFERENCE_STEPS, metric_column
from scalebench.results.store import TIME_LIMITS_KEY, run_status

# Fields of the provenance tables, one table per distinct environment (provenance.environment),
# resources aside: a scaling campaign runs one environment on several world sizes.
PROVENANCE_FIELDS = (*(prov_column(f) for f in ENVIRONMENT_FIELDS if f not in RESOURCE_FIELDS),
                     "prov_complete")
# Fields of one run's resources, listed per run.
RUN_FIELDS = ("prov_world_size", "prov_rank_hosts", "prov_slurm_job_id")
RUN = "run"  # column added here: the run (config hash, repetition, world size, environment)


def headline_metric(dataset_name: str) -> tuple[str, str]:
    """(column, label) of the headline metric of a dataset (benchopt's name, any parameters):
    its spec's (ProblemSpec.headline), PSNR for a dataset of a folder's own files."""
    spec = problem_spec(dataset_name)
    return spec.headline if spec else DEFAULT_HEADLINE


def beats_blank_sky(rows: pd.DataFrame) -> pd.Series:
    """Per run of a dataset judged by SNR (radio interferometry): whether its last row's SNR
    is above 0 dB, the SNR of a blank (all-zero) sky. Runs of other datasets are left out."""
    column = metric_column("snr_db")
    judged = rows[rows["dataset_name"].map(headline_metric).str[0] == column]
    if judged.empty or column not in judged:
        return pd.Series(dtype=bool)
    last = judged.sort_values("stop_val").groupby(RUN, sort=False).last()
    return last[column] > 0


def blank_sky_line(rows: pd.DataFrame) -> str:
    """One line on the radio runs of ``rows`` against a blank sky; "" when there is none."""
    verdicts = beats_blank_sky(rows)
    if verdicts.empty:
        return ""
    losing = [str(run) for run, beats in verdicts.items() if not beats]
    line = (f"radio interferometry: {int(verdicts.sum())} of {len(verdicts)} run(s) beat a "
            f"blank sky (final SNR > 0 dB)")
    return line + (f"; not: {', '.join(losing)}" if losing else "")


SOURCE = "source_file"  # column added here: the file a row came from


@dataclass
class Results:
    rows: pd.DataFrame
    files: list[dict] = field(default_factory=list)  # path, rows, status, failures, ...
    dropped: list[dict] = field(default_factory=list)  # superseded duplicate runs
    labels: dict[str, str] = field(default_factory=dict)  # run -> short label
    # Answers of `scalebench capacity` (report.capacity.load_capacity) for the capacity view.
    capacity: list[dict] = field(default_factory=list)
    # ``--per-image``: a configuration run on several images shown one run per image, not as
    # its figures over the images (report.over_images).
    per_image: bool = False

    def runs(self) -> list[str]:
        return list(dict.fromkeys(self.rows[RUN]))


def experiment_key(frame: pd.DataFrame) -> pd.Series:
    """Config and world size: one config run on 1 and on 2 ranks (``--nproc``) is two
    experiments of a scaling series."""
    names = frame["dataset_name"].astype(str) + " x " + frame["solver_name"].astype(str)
    if "prov_config_hash" in frame:
        names = frame["prov_config_hash"].astype(str).str[:16].where(
            frame["prov_config_hash"].notna(), names)
    if "prov_world_size" in frame:
        names = names + "/ranks" + frame["prov_world_size"].astype(str)
    return names


def _run_key(frame: pd.DataFrame) -> pd.Series:
    """The experiment, the repetition and the environment: the same run in two environments
    (threads, image, commit...) is two runs of a series, not a duplicate."""
    return experiment_key(frame) + "/rep" + frame["idx_rep"].astype(str) + "/env" + \
        _environment_keys(frame)


def _environment_keys(frame: pd.DataFrame) -> pd.Series:
    """Per row, its environment key, computed once per distinct environment."""
    columns = [prov_column(f) for f in ENVIRONMENT_FIELDS if prov_column(f) in frame]
    if not columns:
        return pd.Series(environment_key({}), index=frame.index)
    groups = frame.groupby(columns, dropna=False, sort=False).ngroup()
    keys = {group: environment_key(frame.loc[index, columns].to_dict())
            for index, group in groups.drop_duplicates().items()}
    return groups.map(keys)


def _latest(frame: pd.DataFrame, order: int) -> tuple:
    date = frame["run_date"].dropna().max() if "run_date" in frame else None
    return (str(date) if date is not None else "", order)


def load_results(paths: list[Path]) -> Results:
    """Read, merge and deduplicate ``paths`` (raises UnreadableResults on a bad file)."""
    frames, files = [], []
    for order, path in enumerate(paths):
        frame = read_results(path)
        frame[SOURCE] = str(path)
        frame[RUN] = _run_key(frame)
        frame["_order"] = order
        record = run_status(path)
        files.append({"path": str(path), "rows": len(frame),
                      "status": record.get("status", "no run record (plain benchopt file)"),
                      "failures": record.get("failures", []),
                      "tuned": record.get("tuned"),
                      "time_limits": record.get(TIME_LIMITS_KEY, {})})
        frames.append(frame)
    merged = pd.concat(frames, ignore_index=True)
    kept, dropped = [], []
    for run, rows in merged.groupby(RUN, sort=False):
        copies = sorted(((_latest(part, order), part) for order, part in
                         rows.groupby("_order")), key=lambda item: item[0])
        kept.append(copies[-1][1])
        for (date, _), part in copies[:-1]:
            dropped.append({"run": run, "dropped_file": part[SOURCE].iloc[0],
                            "dropped_date": date,
                            "kept_file": copies[-1][1][SOURCE].iloc[0],
                            "kept_date": copies[-1][0][0]})
    rows = pd.concat(kept, ignore_index=True).drop(columns="_order")
    results = Results(rows, files, dropped)
    results.labels = run_labels(rows)
    return results


# Run records that belong to a configuration though no parameter names them: 'pretrained:
# auto' runs deepinv's full-size network where its file is cached, else the small bundled one.
CONFIGURATION_RECORDS = ("prov_denoiser_architecture",)


def _parameter_columns(rows: pd.DataFrame) -> list[str]:
    return [c for c in rows.columns if c.startswith(("p_dataset_", "p_solver_"))]


def is_resource(column: str) -> bool:
    """Columns of a run's resources (SLURM nodes and tasks), not of its configuration."""
    return column.startswith("p_solver_slurm_")


def parameter_text(value) -> str:
    """A parameter value as a reader wrote it: a whole number stays whole (a column of
    integers that merging made float because another file lacks it prints 1, not 1.0)."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        value = float(value)
        return str(int(value)) if value.is_integer() else f"{value:g}"
    return str(value)


def run_labels(rows: pd.DataFrame, leave_out: tuple[str, ...] = ()) -> dict[str, str]:
    """Short labels: solver and dataset names with the parameters that differ between the
    runs of that solver (or dataset); benchopt's names list every parameter.
    ``leave_out``: columns not named (e.g. the one a plot's axis shows); ``prov_world_size``
    and ``idx_rep`` among them drop the ranks and the repetition."""
    first = rows.groupby(RUN, sort=False).first()
    owners = {"p_solver_": first["solver_name"].astype(str).str.split("[").str[0],
              "p_dataset_": first["dataset_name"].astype(str).str.split("[").str[0]}
    labels = {}
    for run, row in first.iterrows():
        params = []
        for prefix, names in owners.items():
            same = first[names == names[run]]
            params += [f"{c.removeprefix(prefix)}={parameter_text(row[c])}"
                       for c in _parameter_columns(rows)
                       if c.startswith(prefix) and not is_resource(c) and c not in leave_out
                       and pd.notna(row[c]) and same[c].astype(str).nunique(dropna=False) > 1]
        solver_runs = first[owners["p_solver_"] == owners["p_solver_"][run]]
        params += [f"network={row[c]}" for c in CONFIGURATION_RECORDS
                   if c in first and c not in leave_out and pd.notna(row[c])
                   and solver_runs[c].astype(str).nunique(dropna=False) > 1]
        repetition = f" rep {row['idx_rep']}" if first["idx_rep"].nunique() > 1 \
            and "idx_rep" not in leave_out else ""
        ranks = f" {parameter_text(row['prov_world_size'])} ranks" \
            if "prov_world_size" in first and first["prov_world_size"].nunique() > 1 \
            and "prov_world_size" not in leave_out else ""
        labels[run] = " ".join([f"{owners['p_solver_'][run]} on "
                                f"{owners['p_dataset_'][run]}", *params]) \
            + repetition + ranks
    for run, environment in series_environments(first).items():
        labels[run] += f" {environment}"
    return labels


def series_environments(first: pd.DataFrame) -> dict[str, str]:
    """Per run (``first``: each run's first row, indexed by run), the environment fields that
    differ between the runs of its experiment, as a label; runs of a one-environment
    experiment are left out."""
    found = {}
    for _, group in first.groupby(experiment_key(first), sort=False):
        texts = environment_labels(group.to_dict("records"))
        found.update({run: text for run, text in zip(group.index, texts, strict=True) if text})
    return found


def configuration_columns(rows: pd.DataFrame, leave_out: tuple[str, ...] = ()) -> list[str]:
    """Parameter columns (and CONFIGURATION_RECORDS) that define a configuration, without
    resources and ``leave_out``."""
    records = [c for c in CONFIGURATION_RECORDS if c in rows]
    return [c for c in _parameter_columns(rows) + records
            if not is_resource(c) and c not in leave_out]


def mixed_environment(rows: pd.DataFrame) -> dict[str, list[str]]:
    """Environment fields (resources aside) with more than one value among ``rows``:
    ``prov_<field>`` -> values."""
    fields = [f for f in ENVIRONMENT_FIELDS if f not in RESOURCE_FIELDS and prov_column(f) in rows]
    distinct = rows[[prov_column(f) for f in fields]].drop_duplicates().to_dict("records")
    return {prov_column(field): sorted(set(values))
            for field, values in differing_fields(distinct, fields).items()}


def environment_groups(results: Results) -> list[tuple[dict, list[str]]]:
    """Distinct environments (provenance fields present, resources aside) and their
    runs."""
    fields = [f for f in PROVENANCE_FIELDS if f in results.rows]
    if not fields:
        return []
    first = results.rows.groupby(RUN, sort=False).first()
    groups: dict[tuple, list[str]] = {}
    for run, row in first.iterrows():
        key = tuple(parameter_text(row[f]) for f in fields)
        groups.setdefault(key, []).append(run)
    return [(dict(zip(fields, key, strict=True)), runs)
            for key, runs in groups.items()]


def run_resources(results: Results, run: str) -> dict[str, str]:
    """The resources ``run`` ran on (RUN_FIELDS present): field -> value."""
    row = results.rows[results.rows[RUN] == run].iloc[0]
    return {f: parameter_text(row[f]) if pd.notna(row[f]) else "" for f in RUN_FIELDS
            if f in results.rows}


def estimate_images(results: Results) -> list[dict]:
    """For every run that kept its images (save_estimate): the PNG previews of
    the ground truth, the initial and the final estimate, found next to its results file."""
    from scalebench.results.estimates import ESTIMATES_FOLDER, GROUND_TRUTH_PREFIX

    needed = {"prov_result_sha256", "prov_data_sha256", "stop_val"}
    if not needed <= set(results.rows.columns):
        return []
    found = []
    for run, rows in results.rows.groupby(RUN, sort=False):
        rows = rows.sort_values("stop_val")
        folder = Path(rows[SOURCE].iloc[0]).with_suffix("") / ESTIMATES_FOLDER
        first, last = rows.iloc[0], rows.iloc[-1]
        images = {"ground truth": folder / f"{GROUND_TRUTH_PREFIX}{first['prov_data_sha256']}.png",
                  "initial estimate": folder / f"{first['prov_result_sha256']}.png",
                  "final estimate": folder / f"{last['prov_result_sha256']}.png"}
        if all(path.is_file() for path in images.values()):
            found.append({"run": run, "label": results.labels[run],
                          "images": images, "first": first, "last": last})
    return found


# Label mark of runs whose learned denoiser had random weights: their quality says nothing about
# the method.
RANDOM_MARK = " [random weights]"


def random_weight_experiments(rows: pd.DataFrame) -> set[str]:
    """Runs whose learned denoiser ran with random weights (prov_weights 'random')."""
    if "prov_weights" not in rows:
        return set()
    return set(rows.loc[rows["prov_weights"] == "random", RUN])


def measured(rows: pd.DataFrame, base: str, over_ranks: str = "max") -> str | None:
    """The column of a per-step figure: its ``over_ranks`` statistic (max or mean) when
    recorded, else rank 0's."""
    for name in (f"{base}_{over_ranks}", base):
        if name in rows and rows[name].notna().any():
            return name
    return None


def per_run(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its first row's parameters and provenance, with the mean of
    every measured figure (objective_*) over its iterations (stop_val > 0) and its time per
    iteration (benchopt's solver time at the last row over the iterations done)."""
    first = rows.groupby(RUN, sort=False).first()
    iterations = rows[rows["stop_val"] > 0]
    numeric = [c for c in iterations.select_dtypes("number").columns
               if c.startswith("objective_")]
    means = iterations.groupby(RUN, sort=False)[list(numeric)].mean()
    table = first.drop(columns=[c for c in means.columns if c in first]).join(means)
    last = rows.sort_values("stop_val").groupby(RUN, sort=False).last()
    done = last["stop_val"].where(last["stop_val"] > 0)
    table["time_per_iteration_s"] = (last["time"] / done) if "time" in last else float("nan")
    for column in table.columns:  # peaks: the largest over the run, not the mean
        if "peak" in column and column in rows:
            table[column] = rows.groupby(RUN, sort=False)[column].max()
    return table


def step_peaks(table: pd.DataFrame, steps: tuple[str, ...] = INFERENCE_STEPS
               ) -> dict[str, pd.Series]:
    """Per ``per_run`` row, the largest peak of any of ``steps`` and any rank, by memory:
    'host_rss' (resident set) and 'cuda_alloc' (CUDA allocated), those recorded."""
    peaks = {}
    for kind in ("host_rss", "cuda_alloc"):
        columns = [c for step in steps
                   for c in [measured(table, f"objective_{step}_peak_{kind}_mib")] if c]
        if columns:
            peaks[kind] = table[columns].max(axis=1)
    return peaks
