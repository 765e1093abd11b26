"""Plans of configs for the tests of `scalebench plan`: the shipped configs, small configs and
parallel configs written for a test, and the jobs a plan holds."""

from __future__ import annotations

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
