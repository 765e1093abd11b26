"""Provenance of each result row, computed in the process that produced it.

A run's fixed part (the process record from ``provenance.collect()``, read in the worker after
the run's switches are set; canonical config, hash, seeds, data digest) is computed once when
the run starts; each row adds the digest of its own estimate.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from provenance import SCHEMA_VERSION, array_digest, canonical_json, collect, config_hash
from provenance.schema import column
from scalebench.rank.context import TimedContext
from scalebench.rank.rank_checks import rank_hosts

RESULT_COLUMN = column("result_sha256")
# The weights fields of a run that loads no denoiser weights (a training run trains its own).
NO_WEIGHTS = {"weights": "none", "weights_sha256": "", "denoiser_architecture": "{}"}


def experiment_config(source: dict, solver_name: str, solver_params: dict, benchmark: str,
                      objective: str) -> dict:
    """Everything that determines a run's numbers, in the form replay rebuilds it from.

    ``source`` is the dataset's {"name", "params"} (``ProblemSetup.source``); ``benchmark``
    and ``objective`` name the benchmark folder and its objective.
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": benchmark,
        "objective": {"name": objective, "params": {}},
        "dataset": {"name": source["name"], "params": source["params"]},
        "solver": {"name": solver_name, "params": solver_params},
    }


def run_provenance(source: dict, data_sha256: str, solver_name: str, solver_params: dict,
                   context: TimedContext, benchmark: str, objective: str,
                   weights: dict[str, str] = NO_WEIGHTS) -> dict[str, Any]:
    """Every ``prov_*`` field of a run's rows but the result digest (computed once per run).

    ``weights``: which denoiser weights ran (``denoisers.networks.weights_record``)."""
    config_json = canonical_json(experiment_config(source, solver_name, solver_params,
                                                   benchmark, objective))
    seeds = {"dataset": source["params"].get("seed"), "solver": solver_params["seed"]}
    fields = {
        **collect(),
        "rank_hosts": json.dumps(rank_hosts(context)),
        "profiler_mode": solver_params["profiler"],
        "deterministic_mode": solver_params["deterministic"],
        "seeds": json.dumps(seeds, sort_keys=True),
        "data_sha256": data_sha256,
        "config_json": config_json,
        "config_hash": config_hash(config_json),
        **{name: weights[name] for name in NO_WEIGHTS},
    }
    return {column(name): value for name, value in fields.items()}


def row_provenance(record: dict[str, Any], estimate: torch.Tensor) -> dict[str, Any]:
    """All ``prov_*`` fields of one row: the run's record and the estimate's digest."""
    return {**record, RESULT_COLUMN: array_digest(estimate)}
