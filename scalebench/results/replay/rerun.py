"""Re-run archived runs from their stored canonical config and compare bit for bit.

Before running, each run is checked for tampering and its environment is compared with the
current one (``scalebench.results.replay.checks``); a mismatch is refused unless ``force``,
which compares within a tolerance instead. Each run re-runs in the benchmark folder its
stored config names (``benchmark``), unless one is given.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
import yaml

from provenance import collect
from provenance.results import read_results
from scalebench.benchmarks import BENCHMARKS, benchmark_in_folder
from scalebench.errors import ScalebenchError
from scalebench.results.replay.checks import (
    FORCE_RTOL,
    ArchivedRun,
    Verdict,
    changed_environment,
    load_runs,
    parse_rows,
    tampering,
    verdict,
    world_size,
)


def _replay_config(runs: list[ArchivedRun]) -> dict:
    """One benchopt config reproducing the runs that share a dataset config."""
    solvers, seen = [], set()
    for run in runs:
        key = json.dumps(run.config["solver"], sort_keys=True)
        if key not in seen:
            seen.add(key)
            solvers.append({run.config["solver"]["name"]:
                            run.config["solver"]["params"]})
    dataset = runs[0].config["dataset"]
    max_iter = max(e.config["solver"]["params"]["max_iter"] for e in runs)
    return {"objective": [runs[0].config["objective"]["name"]],
            "dataset": [{dataset["name"]: dataset["params"]}], "solver": solvers,
            "n-repetitions": max(e.repetition for e in runs) + 1,
            "max-runs": max_iter + 1, "timeout": "24h"}


def benchmark_folder(run: ArchivedRun) -> Path:
    """The benchmark folder the run's stored config names."""
    name = run.config.get("benchmark")
    benchmark = benchmark_in_folder(str(name))
    if benchmark is None:
        known = ", ".join(sorted(spec.folder for spec in BENCHMARKS.values()))
        raise ScalebenchError(f"{run.label}: stored config names benchmark {name!r} "
                              f"(known: {known}); give --benchmark FOLDER")
    return benchmark.path


# Runs one config: (config file, benchmark folder, result name, ranks, results folder); the
# results parquet is then <results folder>/<result name>.parquet. The CLI hands in the
# launcher's run (scalebench run): replay itself never imports the launcher.
Rerun = Callable[[Path, Path, str, int, Path], None]


def _rerun(runs: list[ArchivedRun], benchmark: Path, workdir: Path,
           rerun: Rerun) -> pd.DataFrame:
    """Re-run ``runs`` with ``rerun``, one launch per dataset config and world size."""
    groups: dict[tuple[str, int], list[ArchivedRun]] = {}
    for run in runs:
        key = (json.dumps(run.config["dataset"], sort_keys=True), world_size(run))
        groups.setdefault(key, []).append(run)
    frames = []
    for index, ((_, nproc), group) in enumerate(groups.items()):
        config = workdir / f"replay_{index}.yml"
        config.write_text(yaml.safe_dump(_replay_config(group), sort_keys=False))
        rerun(config, benchmark, f"replay_{index}", nproc, workdir)
        frames.append(read_results(workdir / f"replay_{index}.parquet"))
    return pd.concat(frames, ignore_index=True)


def current_environment() -> dict:
    """This machine's environment as a re-run records it (provenance's fields, torch's
    threads), for comparison with a run's archived one."""
    current = collect(refresh=True)
    current["torch_threads"] = torch.get_num_threads()
    return current


def replay(path: Path, rows: str | None, force: bool, rerun: Rerun,
           benchmark: Path | None = None) -> list[Verdict]:
    """One verdict per run of the selected rows, in the file's order, re-run by
    ``rerun``; ``benchmark`` overrides the folder each run's config names."""
    df = read_results(path)
    runs = load_runs(df, parse_rows(rows, len(df)))
    current = current_environment()
    # By position: one config on other rank counts gives runs with one config hash.
    runnable, verdicts = [], {}
    for index, run in enumerate(runs):
        # The launcher re-runs on the archived number of ranks.
        here = {**current, "world_size": world_size(run)}
        tampered = tampering(run)
        differences = changed_environment(run, here)
        if tampered:
            verdicts[index] = Verdict("TAMPERED", run.label, tampered)
        elif differences and not force:
            verdicts[index] = Verdict(
                "REFUSED", run.label, f"environment differs ({'; '.join(differences)});"
                f" --force compares within rtol {FORCE_RTOL:g} instead")
        else:
            runnable.append((index, run, differences))
    by_folder: dict[Path, list[tuple[int, ArchivedRun, list[str]]]] = {}
    for index, run, differences in runnable:
        folder = benchmark or benchmark_folder(run)
        by_folder.setdefault(folder, []).append((index, run, differences))
    for folder, group in by_folder.items():
        with tempfile.TemporaryDirectory(prefix="scalebench-replay-") as workdir:
            replayed = _rerun([e for _, e, _ in group], folder, Path(workdir), rerun)
        for index, run, differences in group:
            verdicts[index] = verdict(run, differences, replayed)
    return [verdicts[index] for index in range(len(runs))]
