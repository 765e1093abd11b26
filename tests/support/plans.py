"""Plans of configs for the tests of `scalebench plan`: the shipped configs, small configs and
parallel configs written for a test, and the jobs a plan holds."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from scalebench.planning.jobs import Plan
from scalebench.planning.plan import make_plan
from tests.support.cli import tiny_experiment, write_experiment
from tests.support.paths import REPO

CONFIGS = REPO / "configs"
SUBMITIT = CONFIGS / "scaling" / "submitit.yml"


def plan_of(config: Path, parallel: Path | None = None, nproc: int = 1) -> Plan:
    return make_plan(config, parallel, nproc)


def jobs_of(plan: Plan, dataset_keys=(), solver_keys=()) -> list[tuple]:
    """(dataset, its chosen parameters, solver, its chosen parameters, ranks) of every job."""
    rows = []
    for job in plan.jobs:
        (dataset, dataset_params), = job.dataset.items()
        (solver, solver_params), = job.solver.items()
        rows.append((dataset, tuple(dataset_params.get(k) for k in dataset_keys), solver,
                     tuple(solver_params.get(k) for k in solver_keys), job.ranks))
    return rows


def config_file(folder: Path, name: str = "c.yml", **overrides) -> Path:
    """A tiny experiment (tests.support.cli.tiny_experiment with ``overrides``) in ``folder``."""
    return write_experiment(folder, tiny_experiment(**overrides), name)


def parallel_file(folder: Path, **keys) -> Path:
    """A submitit parallel config with ``keys``."""
    path = folder / "parallel.yml"
    path.write_text(yaml.safe_dump({"backend": "submitit", **keys}))
    return path


def pnp(**params) -> list[dict]:
    """A solver list of one CPU PnP of 2 iterations."""
    return [{"pnp": {"max_iter": 2, "device": "cpu", **params}}]


def timed_calibration(configuration, grad_per_unknown=1e-6) -> None:
    """A cached calibration of ``configuration`` whose probes at 32-128 took 1 s of set-up
    (0.5 s of it the operator norm), ``grad_per_unknown`` seconds per unknown per iteration,
    0.1 s per evaluation and 2 s to start."""
    from scalebench.planning.capacity.calibration import probe_sizes
    from scalebench.planning.capacity.calibration_cache import cache_path
    from scalebench.planning.capacity.model import CalibrationPoint, MemoryModel

    points = tuple(CalibrationPoint(
        size, size * size, 0, size * size, (2**20, 2**20), 0, False,
        {"setup_s": 1.5, "steps": {"grad": [1.0, grad_per_unknown * size * size]},
         "evaluation_s": 0.1, "norm_s": 0.5, "norm_applications": 6, "norm_capped": False,
         "denoise_scale": 1.0, "startup_s": 2.0, "chunks_cut": False})
        for size in (32, 64, 96, 128))
    memory = (2**20, 0.0, 0.0, 0.0, 0.0)
    path = cache_path(configuration, probe_sizes(configuration))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(MemoryModel((memory, memory), 0.0, 0.0, points).to_json()))
