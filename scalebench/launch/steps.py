"""The launcher's steps that need the whole stack, each run in a short-lived child process.

``python -m scalebench.launch.steps expand CONFIG --world-size N --folder DIR`` validates the
whole grid for N ranks and writes one benchopt config per experiment (a dataset x solver
parameter combination) into DIR; it prints the experiments as JSON. With ``--check-devices``
(``scalebench run``, on the machine where the ranks start) it also refuses a ``device: cuda``
experiment when this machine has no CUDA device; ``validate`` and ``plan`` leave that check
out, so that a login node without a GPU can check a GPU config.
``... benchmark CONFIG`` prints the name of the repository's benchmark folder that runs
the objective CONFIG names.
``... status RESULTS`` prints the run record of a results file (status, finished experiments).
``... publish --final F --status S --part ID=PATH ...`` merges finished experiments into F
(atomically; the rows already in F are kept) and records the run in its metadata.
``... render RESULTS`` writes the offline HTML report (scalebench.report) next to RESULTS.
Exit status 2 with one line on stderr for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow as pa
import yaml

from provenance.canonical import canonical_json, config_hash
from provenance.results import (
    UnreadableResults,
    distinct_records,
    read_table,
    rename_provenance,
    write_atomically,
)
from provenance.schema import METADATA_KEY, SCHEMA_VERSION
from scalebench.errors import ConfigError, ScalebenchError, error_lines

RUN_KEY = b"scalebench.run"
EXPERIMENT_COLUMN = "experiment_id"


def component_label(name: str, params: dict) -> str:
    inside = ",".join(f"{key}={value}" for key, value in params.items())
    return f"{name}[{inside}]" if inside else name


def expand(config: Path, world_size: int, folder: Path,
           check_devices: bool = False, check_memory: str = "") -> list[dict]:
    """One benchopt config per experiment of ``config``, in benchopt's order, with the
    resources it asks for (slurm_nodes, slurm_ntasks_per_node; None when not set), its
    dataset and solver ({name: parameters}) and the run options. ``check_devices``: also
    refuse a device this machine does not have; ``check_memory``: refuse experiments whose
    ranks, all on this machine, cannot fit its memory (nothing is written then): "all" of
    them (a local run), "local" those that name no SLURM resources (the others run on
    compute nodes this machine knows nothing of), "" none."""
    from scalebench.config import check_devices_available, load_experiment

    experiment = load_experiment(config, world_size)
    if check_devices:
        check_devices_available(experiment)
    raw = yaml.safe_load(config.read_text())
    options = {key: value for key, value in raw.items()
               if key not in ("dataset", "solver", "force-solver")}
    experiments = []
    for dataset in experiment.datasets:
        for dataset_params in dataset.combinations():
            for solver in experiment.solvers:
                for solver_params in solver.combinations():
                    key = {"dataset": {dataset.name: dataset_params},
                           "solver": {solver.name: solver_params}}
                    identifier = config_hash(canonical_json(key))[:16]
                    path = folder / f"{identifier}.yml"
                    label = f"{component_label(dataset.name, dataset_params)} x " \
                            f"{component_label(solver.name, solver_params)}"
                    experiments.append({
                        "id": identifier, "label": label, "config": str(path),
                        "nodes": solver_params.get("slurm_nodes"),
                        "ntasks_per_node": solver_params.get("slurm_ntasks_per_node"),
                        **key, "options": options})
    if check_memory:
        from scalebench.launch.runner import experiment_ranks, names_slurm_resources
        from scalebench.plan import local_memory_problems

        here = [e for e in experiments
                if check_memory == "all" or not names_slurm_resources(e)]
        problems = local_memory_problems(here, lambda e: experiment_ranks(e, world_size))
        if problems:
            raise ConfigError("\n".join(problems))
    folder.mkdir(parents=True, exist_ok=True)
    for experiment in experiments:
        Path(experiment["config"]).write_text(yaml.safe_dump(
            {**options, "dataset": [experiment["dataset"]], "solver": [experiment["solver"]]},
            sort_keys=False))
    return experiments


def config_benchmark(config: Path) -> str:
    """The name of the benchmark folder for ``config``'s objective; "" for an unreadable
    config (``expand`` then says what is wrong with it)."""
    from scalebench.benchmarks import FOLDER_BY_OBJECTIVE, config_objective

    try:
        raw = yaml.safe_load(config.read_text())
    except (OSError, yaml.YAMLError):
        return ""
    return FOLDER_BY_OBJECTIVE[config_objective(raw)].name


def run_record(path: Path) -> dict:
    """The run record stored in a results file by ``publish`` ({} for other files)."""
    metadata = read_table(path).schema.metadata or {}
    return json.loads(metadata[RUN_KEY]) if RUN_KEY in metadata else {}


def publish(final: Path, parts: list[tuple[str, Path]], status: str, failures: list[dict],
            config: str) -> int:
    """Merge ``parts`` (experiment id, benchopt parquet) into ``final``; return its rows."""
    tables, done = [], []
    if final.is_file():
        tables.append(read_table(final).replace_schema_metadata(None))
        done = list(run_record(final).get("experiments", []))
    for identifier, part in parts:
        table = rename_provenance(read_table(part))
        tables.append(table.append_column(EXPERIMENT_COLUMN,
                                          pa.array([identifier] * table.num_rows)))
        done.append(identifier)
    table = pa.concat_tables(tables, promote_options="permissive")
    document = {"schema_version": SCHEMA_VERSION, "records": distinct_records(table)}
    record = {"status": status, "experiments": done, "failures": failures, "config": config}
    metadata = {METADATA_KEY: json.dumps(document).encode(),
                RUN_KEY: json.dumps(record).encode()}
    write_atomically(table.replace_schema_metadata(metadata), final)
    return table.num_rows


def render(results: Path) -> Path:
    """The offline HTML report of ``results``, written next to it (``<name>.html``)."""
    from scalebench.report import write_report

    report = results.with_suffix(".html")
    write_report([results], report)
    return report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scalebench.launch.steps")
    steps = parser.add_subparsers(dest="step", required=True)
    step = steps.add_parser("expand")
    step.add_argument("config", type=Path)
    step.add_argument("--world-size", type=int, default=1)
    step.add_argument("--folder", type=Path, required=True)
    step.add_argument("--check-devices", action="store_true",
                      help="refuse a device this machine does not have")
    step.add_argument("--check-memory", choices=("all", "local"), default="",
                      help="refuse experiments that cannot fit this machine's memory: all, "
                           "or those that name no SLURM resources")
    step = steps.add_parser("benchmark")
    step.add_argument("config", type=Path)
    step = steps.add_parser("status")
    step.add_argument("results", type=Path)
    step = steps.add_parser("publish")
    step.add_argument("--final", type=Path, required=True)
    step.add_argument("--status", choices=("partial", "complete"), required=True)
    step.add_argument("--part", action="append", default=[], help="ID=PATH")
    step.add_argument("--failures", default="[]", help="JSON list of failures")
    step.add_argument("--config", default="")
    step = steps.add_parser("render")
    step.add_argument("results", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.step == "expand":
            print(json.dumps(expand(args.config, args.world_size, args.folder,
                                    args.check_devices, args.check_memory)))
        elif args.step == "benchmark":
            print(config_benchmark(args.config))
        elif args.step == "status":
            print(json.dumps(run_record(args.results)))
        elif args.step == "publish":
            parts = [(item.split("=", 1)[0], Path(item.split("=", 1)[1])) for item in args.part]
            rows = publish(args.final, parts, args.status, json.loads(args.failures),
                           args.config)
            print(json.dumps({"rows": rows}))
        else:
            print(render(args.results))
    except (ScalebenchError, UnreadableResults) as error:
        print(*error_lines(error), sep="\n", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
