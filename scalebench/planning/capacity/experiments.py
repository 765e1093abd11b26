"""The configurations of an experiment grid, as ``scalebench capacity`` sizes them: each
experiment with its size parameter left out, once per rank count."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from scalebench.errors import ScalebenchError
from scalebench.planning.capacity.configuration import Configuration


def configurations(config: Path, nproc: int, size_parameter: str, device: str | None,
                   parallel_config: Path | None = None) -> list[tuple[Configuration, str, int]]:
    """(configuration, label, ranks) of every experiment of ``config``, those that differ
    only by the size once (by their run's length too: one calibration, two time answers).
    Ranks as ``plan`` counts them: the solver's slurm_* parameters
    over the parallel config's, else ``nproc``."""
    from scalebench.benchmarks import INFERENCE, config_benchmark
    from scalebench.experiment.config import check_config, read_config
    from scalebench.experiment.expand import component_label, expand_config
    from scalebench.planning.jobs import job_ranks
    from scalebench.planning.parallel_config import read_parallel_config

    raw = read_config(config)  # the one read of the file
    objective = config_benchmark(raw).objective
    if objective != INFERENCE.objective:
        raise ScalebenchError(f"scalebench capacity covers the inference benchmark's "
                              f"experiments ({INFERENCE.objective}), not {objective}")
    parallel = read_parallel_config(parallel_config) if parallel_config else None
    grid = check_config(raw, config, job_ranks({}, parallel, nproc))
    with tempfile.TemporaryDirectory(prefix="scalebench-capacity-") as scratch:
        experiments = expand_config(grid, Path(scratch))
    found, seen = [], set()
    for experiment in experiments:
        (dataset, dataset_params), = experiment["dataset"].items()
        (solver, solver_params), = experiment["solver"].items()
        spec = INFERENCE.problems[dataset]
        if size_parameter not in spec.params or spec.params[size_parameter].kind is not int:
            sizes = [name for name, param in spec.params.items() if param.kind is int]
            raise ScalebenchError(f"dataset '{dataset}' has no size parameter "
                                  f"'{size_parameter}' (its integer parameters: "
                                  f"{', '.join(sizes) or 'none'}); choose one with "
                                  f"--size-parameter")
        ranks = job_ranks(solver_params, parallel, nproc)
        if device is not None:
            solver_params = {**solver_params, "device": device}
        configuration = Configuration(dataset, dataset_params, solver, solver_params,
                                      size_parameter)
        key = (json.dumps(configuration.key_record(), sort_keys=True, default=str),
               configuration.run_length(), ranks)
        if key in seen:
            continue
        seen.add(key)
        label = f"{component_label(dataset, configuration.without_size()['dataset_params'])}" \
                f" x {component_label(solver, solver_params)}"
        found.append((configuration, label, ranks))
    return found
