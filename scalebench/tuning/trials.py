"""One trial of a study: its setting written as a config of the same format as the user's (one
experiment per validation image), run by the same launcher as ``scalebench run`` into a
results file of its own, and judged from its rows. Rank 0 of each run reports to the study and
stops a trial that cannot catch up (scalebench.rank.trial_report); the trial is then told
pruned, complete with its value, or failed (a run that failed, diverged or reached no value).
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from scalebench.launch.rank_env import TASK_VARIABLES
from scalebench.launch.runner import LaunchRequest, run
from scalebench.problems import PROBLEMS
from scalebench.rank.trial_report import PRUNED_ATTRIBUTE, TRIAL_VARIABLE
from scalebench.tuning.objective import Objective, trial_value
from scalebench.tuning.search import Search

if TYPE_CHECKING:
    import optuna

# User attributes of a trial: its results file and the CPU seconds its processes used.
RESULTS_ATTRIBUTE = "scalebench_results"
CPU_ATTRIBUTE = "scalebench_cpu_s"


@dataclass(frozen=True)
class TrialPlace:
    """Where a study's trials write: their configs and results files."""

    folder: Path
    study: str
    journal: Path

    def config(self, number: int) -> Path:
        return self.folder / f"{self.study}-trial-{number:04d}.yml"

    def results(self, number: int) -> Path:
        return self.folder / f"{self.study}-trial-{number:04d}.parquet"


def suggest(trial: optuna.Trial, search: Search) -> dict[str, float]:
    """The trial's setting: each range sampled on its scale."""
    return {r.name: trial.suggest_float(r.name, r.low, r.high, log=r.scale == "log")
            for r in search.ranges}


def trial_config(search: Search, setting: dict[str, float], options: dict) -> dict:
    """The config of one trial: the study's configuration at ``setting`` over its images,
    one repetition, with the user's run options."""
    dataset, dataset_params = search.dataset
    solver, solver_params = search.solver
    family = PROBLEMS[dataset].images
    images = [family.parameters(name)[family.parameter] for name in search.images]
    return {**options, "n-repetitions": 1,
            "dataset": [{dataset: {**dataset_params, family.parameter: images}}],
            "solver": [{solver: {**solver_params, **setting}}]}


def children_cpu_seconds() -> float:
    """CPU seconds (user and system) of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def trial_environment(report: dict) -> Iterator[None]:
    """The environment of a trial's launch: its trial named for rank 0, and none of the task
    variables of the worker's own SLURM step (a worker that is one task of several runs
    one-rank trials, whose rank would take them for its rank among several)."""
    hidden = {name: os.environ.pop(name) for name in TASK_VARIABLES if name in os.environ}
    os.environ[TRIAL_VARIABLE] = json.dumps(report)
    try:
        yield
    finally:
        os.environ.pop(TRIAL_VARIABLE, None)
        os.environ.update(hidden)


def run_trial(study: optuna.Study, trial: optuna.Trial, search: Search, place: TrialPlace,
              options: dict, objective: Objective) -> dict[str, Any]:
    """Run ``trial`` and tell the study how it ended; what happened, for the progress line."""
    from optuna.trial import TrialState

    setting = suggest(trial, search)
    config = place.config(trial.number)
    place.folder.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(trial_config(search, setting, options), sort_keys=False))
    metric = PROBLEMS[search.dataset[0]].headline[0]
    report = {"journal": str(place.journal), "study": place.study, "trial": trial.number,
              "images": list(search.images), "metric": metric}
    results = place.results(trial.number)
    cpu, start = children_cpu_seconds(), time.monotonic()
    with trial_environment(report):
        status = run(LaunchRequest(config, None, results.stem, html=False,
                                   outputs=place.folder))
    trial.set_user_attr(RESULTS_ATTRIBUTE, results.name)
    trial.set_user_attr(CPU_ATTRIBUTE, children_cpu_seconds() - cpu)
    value = _value(results, metric, objective, len(search.images)) if results.is_file() \
        else None
    if PRUNED_ATTRIBUTE in recorded(study, trial.number).user_attrs:
        state = TrialState.PRUNED
        study.tell(trial.number, state=state)
    elif status == 0 and value is not None:
        state = TrialState.COMPLETE
        study.tell(trial.number, value)
    else:
        state = TrialState.FAIL
        study.tell(trial.number, state=state)
    return {"number": trial.number, "state": state.name.lower(), "value": value,
            "setting": setting, "seconds": time.monotonic() - start}


def recorded(study: optuna.Study, number: int) -> optuna.trial.FrozenTrial:
    """Trial ``number`` as the study's storage holds it now (its ranks may have written to
    it)."""
    return next(t for t in study.get_trials(deepcopy=False) if t.number == number)


def _value(results: Path, metric: str, objective: Objective, images: int) -> float | None:
    import pandas as pd

    rows = pd.read_parquet(results)
    experiments = list(dict.fromkeys(rows["experiment_id"]))
    if len(experiments) < images:  # an image's experiment failed: no judged value
        return None
    return trial_value(rows, metric, objective, experiments)
