"""An experiment file expanded into its experiments: one benchopt config per dataset x solver
parameter combination, in benchopt's order, each named by the hash of its combination.

``expand`` validates the whole grid first (scalebench.experiment.config) and can refuse, before
any rank starts, a device this machine does not have and experiments too large for its
memory; ``scalebench run``, ``validate``, ``plan`` and ``capacity`` all expand through it
(``expand_config``: a config already read and checked). Each experiment's benchopt config
holds the run options benchopt reads, its timeout as seconds (benchopt never parses the
config's duration text), and none of the scalebench keys.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from provenance.canonical import canonical_json, config_hash
from scalebench.durations import seconds_text
from scalebench.errors import ConfigError
from scalebench.experiment.config import Config, check_devices_available, load_config
from scalebench.experiment.scalebench_keys import SCALEBENCH_KEYS


def component_label(name: str, params: dict) -> str:
    inside = ",".join(f"{key}={value}" for key, value in params.items())
    return f"{name}[{inside}]" if inside else name


def expand(config: Path, world_size: int, folder: Path,
           check_devices: bool = False,
           refuse: Callable[[list[dict]], list[str]] | None = None,
           benchmark: Path | None = None) -> list[dict]:
    """``expand_config`` of the file ``config``, read and checked for ``world_size`` ranks;
    ``benchmark``: the folder whose solvers the config may name (None: the repository's)."""
    return expand_config(load_config(config, world_size, benchmark), folder, check_devices,
                         refuse)


def benchopt_options(grid: Config) -> dict:
    """The run options of each experiment's benchopt config: the file's keys but its grid
    and scalebench's own, a timeout as the seconds the checks read."""
    options = {key: value for key, value in grid.raw.items()
               if key not in ("dataset", "solver", "force-solver", *SCALEBENCH_KEYS)}
    if "timeout" in grid.options:
        options["timeout"] = seconds_text(grid.options["timeout"])
    return options


def expand_config(grid: Config, folder: Path, check_devices: bool = False,
                  refuse: Callable[[list[dict]], list[str]] | None = None) -> list[dict]:
    """One benchopt config per experiment of the checked ``grid``, in benchopt's order: its
    id, label, config file, dataset and solver ({name: parameters}) and the run options.
    ``check_devices``: also refuse a device this machine does not have; ``refuse``: a check
    of the experiments, one line per refused one, run before anything is written (this
    machine's memory: scalebench.planning.memory.local_memory_check)."""
    if check_devices:
        check_devices_available(grid)
    options = benchopt_options(grid)
    experiments = []
    for dataset in grid.datasets:
        for dataset_params in dataset.combinations():
            for solver in grid.solvers:
                if not grid.runs(solver.name, dataset.name):
                    continue  # a baseline beside datasets it does not apply to
                for solver_params in solver.combinations():
                    key = {"dataset": {dataset.name: dataset_params},
                           "solver": {solver.name: solver_params}}
                    identifier = config_hash(canonical_json(key))[:16]
                    path = folder / f"{identifier}.yml"
                    label = f"{component_label(dataset.name, dataset_params)} x " \
                            f"{component_label(solver.name, solver_params)}"
                    experiments.append({"id": identifier, "label": label,
                                        "config": str(path), **key, "options": options})
    if refuse is not None:
        errors = refuse(experiments)
        if errors:
            raise ConfigError("\n".join(errors))
    folder.mkdir(parents=True, exist_ok=True)
    for experiment in experiments:
        Path(experiment["config"]).write_text(yaml.safe_dump(
            {**options, "dataset": [experiment["dataset"]], "solver": [experiment["solver"]]},
            sort_keys=False))
    return experiments
