"""A tuning worker: for each study of the tuning in turn, ask the shared study for a setting,
run it as a trial, tell the study how it ended, until the study holds ``trials`` ended trials
(complete and pruned) or the budget is spent. Several workers (``--workers N``, or SLURM
tasks) run this loop over one journal; a RUNNING trial of a dead worker is failed first
(scalebench.tuning.study), so a tuning started again redoes none of its finished trials.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scalebench.errors import ScalebenchError
from scalebench.launch import preloaded
from scalebench.launch.rank_env import TASK_VARIABLES
from scalebench.planning.capacity.time_model import duration_text
from scalebench.tuning.objective import Objective
from scalebench.tuning.search import Search
from scalebench.tuning.study import (
    WORKER_ATTRIBUTE,
    Heartbeat,
    StudyFiles,
    ended_trials,
    fail_stale_trials,
    open_study,
)
from scalebench.tuning.trials import TrialPlace, run_trial

# How long a worker waits for the other workers' running trials before it looks again.
WAIT_S = 2.0
# Trials of one worker that fail one after the other before it gives up: failed trials do not
# count towards --trials, so a config whose every trial fails would otherwise never end.
FAILED_IN_A_ROW = 10


@dataclass(frozen=True)
class WorkerPlan:
    """What a worker does: the studies, where they live, and when to stop."""

    searches: list[Search]
    folder: Path  # the tuning's folder: journals, heartbeats, trials
    options: dict  # the config's run options, handed to every trial
    objective: Objective
    trials: int | None  # ended trials per study; None: until the budget is spent
    budget_s: float | None
    seed: int = 0
    worker: int = 0


def run_worker(plan: WorkerPlan) -> None:
    """Run trials of every study of ``plan`` until each is done or the budget spent, their
    ranks' benchopt processes forked from one preloaded server (``preloaded``): a trial is a
    short run, most of whose start-up would otherwise be the same imports again."""
    env = {k: v for k, v in os.environ.items() if k not in TASK_VARIABLES}  # as trials see it
    with preloaded.serving(env) as server, _variables(server):
        _run_studies(plan)


@contextmanager
def _variables(values: dict[str, str]) -> Iterator[None]:
    os.environ.update(values)
    try:
        yield
    finally:
        for name in values:
            os.environ.pop(name, None)


def _run_studies(plan: WorkerPlan) -> None:
    start = time.monotonic()
    for search in plan.searches:
        files = StudyFiles(plan.folder, search.key)
        study = open_study(files, plan.seed, plan.worker)
        heartbeat = Heartbeat(files)
        try:
            _work_on(study, search, files, heartbeat, plan, start)
        finally:
            heartbeat.close()
        if _spent(plan, start):
            return


def _spent(plan: WorkerPlan, start: float) -> bool:
    return plan.budget_s is not None and time.monotonic() - start >= plan.budget_s


def _work_on(study, search: Search, files: StudyFiles, heartbeat: Heartbeat,
             plan: WorkerPlan, start: float) -> None:
    from optuna.trial import TrialState

    place = TrialPlace(plan.folder / "trials", search.key, files.journal)
    began, ended_before = time.monotonic(), ended_trials(study)  # this study's pace
    failed = 0
    while not _spent(plan, start):
        fail_stale_trials(study, files)
        ended = ended_trials(study)
        if plan.trials is not None and ended >= plan.trials:
            return
        running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
        if plan.trials is not None and ended + running >= plan.trials:
            time.sleep(WAIT_S)  # the last trials are another worker's
            continue
        trial = study.ask()
        trial.set_user_attr(WORKER_ATTRIBUTE, heartbeat.name)
        outcome = run_trial(study, trial, search, place, plan.options, plan.objective)
        print(progress_line(study, search, plan, outcome, time.monotonic() - began,
                            ended_before, time.monotonic() - start), flush=True)
        failed = failed + 1 if outcome["state"] == "fail" else 0
        if failed >= FAILED_IN_A_ROW:
            raise ScalebenchError(f"tune {search.label}: {failed} trials in a row failed "
                                  f"(their logs: {place.folder}); the ended trials are kept")


def progress_line(study, search: Search, plan: WorkerPlan, outcome: dict, elapsed: float,
                  ended_before: int, spent: float) -> str:
    """``tune LABEL: trial k of N (pruned), best 29.84 (trial 3), 2 pruned, ETA 4 min``: the
    ETA at this study's pace since this worker took it up (``elapsed``, ``ended_before``
    trials then), the budget left after ``spent`` seconds of the whole tuning."""
    from optuna.trial import TrialState

    ended = ended_trials(study)
    pruned = len(study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)))
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    best = max(complete, key=lambda t: t.value) if complete else None
    best_text = f"best {best.value:.4g} (trial {best.number})" if best else "no value yet"
    of = f" of {plan.trials}" if plan.trials is not None else ""
    eta = ""
    if plan.trials is not None and ended > ended_before:
        left = max(0, plan.trials - ended)
        pace = elapsed / (ended - ended_before)
        eta = f", ETA {duration_text(pace * left)}" if left else ""
    if plan.budget_s is not None:
        eta += f", budget left {duration_text(max(0.0, plan.budget_s - spent))}"
    return (f"[scalebench] tune {search.label}: trial {ended}{of} ({outcome['state']}), "
            f"{best_text}, {pruned} pruned{eta}")
