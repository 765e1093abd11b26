"""A job's predicted wall time in ``scalebench plan``: from the time model of its
configuration's cached calibration (``scalebench capacity``; "not calibrated" without one,
never a guess), the operator norm counted only where the norm cache will not hold it, its
limit checked against it with ``TIME_MARGIN``, and how the table and its totals show it.
``scalebench run`` gets the same prediction and warning per experiment from its expand child
(``launch_time_checks``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scalebench.durations import TIME_MARGIN
from scalebench.planning.capacity.time_model import (
    COMMUNICATION_NOT_INCLUDED,
    RunPrediction,
    duration_text,
    leaves_out_communication,
)
from scalebench.planning.jobs import Job, Plan

if TYPE_CHECKING:
    from scalebench.experiment.config import Config
# A prediction this many times past its largest probe says so.
EXTRAPOLATION_SHOWN = 1.05


@dataclass(frozen=True)
class ExperimentTime:
    """An experiment's predicted wall time: its longest submission (a local run: its one
    process) and every submission together, how far past its largest probe the prediction
    reaches, and whether its first run computes the operator norm."""

    submission_s: float
    total_s: float
    extrapolation: float
    computes_norm: bool


def experiment_time(experiment: dict, ranks: int, repetitions: int, submissions: int,
                    normed: set[str]) -> ExperimentTime | str | None:
    """``experiment``'s predicted wall time from its configuration's cached time model; "not
    calibrated" without a model; None where there is no size model (training)."""
    if not has_time_model(experiment):  # training: no size model
        return None
    run = experiment_run(experiment, ranks)
    if run is None:
        return "not calibrated"
    return run_time(experiment, run, repetitions, submissions, normed)


def run_time(experiment: dict, run: RunPrediction, repetitions: int, submissions: int,
             normed: set[str]) -> ExperimentTime:
    """The wall time of ``experiment`` whose one run ``run`` predicts. A process starts once
    per submission; the operator norm is computed by the experiment's first run unless the
    norm cache holds it (data.norm_lookup: known without building the problem) or an earlier
    experiment of the campaign computes it (``normed``: their norm keys)."""
    first = computes_norm(experiment, normed)
    per_submission = repetitions // submissions
    longest = run.startup_s + run.run_s(norm=first) + (per_submission - 1) * run.run_s(False)
    return ExperimentTime(longest,
                          longest + (submissions - 1) * (run.startup_s + run.run_s(False)),
                          run.extrapolation, first)


def computes_norm(experiment: dict, normed: set[str]) -> bool:
    """Whether ``experiment``'s first run computes the operator norm: neither the norm cache
    nor an earlier experiment's (``normed``, to which its norm key is added) holds it."""
    import json

    from scalebench.data.norm_lookup import norm_cached
    from scalebench.planning.capacity.configuration import Configuration

    (dataset, dataset_params), = experiment["dataset"].items()
    (solver, solver_params), = experiment["solver"].items()
    norm_key = Configuration(dataset, dataset_params, solver, solver_params,
                             "image_size").norm_run_key()
    key = json.dumps(norm_key, sort_keys=True, default=str)
    first = key not in normed and not norm_cached(norm_key)
    normed.add(key)
    return first


def has_time_model(experiment: dict) -> bool:
    """Whether an expanded experiment's configuration can have a time model: a solver's loop
    on a problem (training has no size model)."""
    from scalebench.loops import SOLVERS
    from scalebench.problems import PROBLEMS

    return next(iter(experiment["solver"])) in SOLVERS and \
        next(iter(experiment["dataset"])) in PROBLEMS


def experiment_run(experiment: dict, ranks: int) -> RunPrediction | None:
    """One run of an expanded experiment (one with a time model) on one of ``ranks`` ranks, as
    its configuration's cached calibration predicts it; None where it is not calibrated."""
    from scalebench.planning.capacity.calibration_cache import calibrated_run

    (dataset, dataset_params), = experiment["dataset"].items()
    (solver, solver_params), = experiment["solver"].items()
    return calibrated_run(dataset, dataset_params, solver, solver_params, ranks)


def experiment_prediction(experiment: dict, ranks: int, repetitions: int,
                          normed: set[str]) -> dict | None:
    """An expanded experiment's predicted times on ``ranks`` ranks as `scalebench run` runs
    it (one process, ``repetitions`` runs), as the numbers the launcher reads:
    ``longest_phase_s``, the longest of the process start, the set-up, the operator norm
    (where this experiment computes it: ``run_time``) and an iteration with its evaluation
    (scalebench.launch.liveness); ``run_s``, its first run from the process start;
    ``experiment_s``, every repetition (the time-limit checks: launch_time_checks,
    launch.requeue); ``computes_norm``. None without a calibrated time model."""
    run = experiment_run(experiment, ranks) if has_time_model(experiment) else None
    if run is None:
        return None
    timed = run_time(experiment, run, repetitions, 1, normed)
    norm_s = run.norm_s if timed.computes_norm else 0.0
    longest = max(run.startup_s, run.setup_s, norm_s, run.iteration_s + run.evaluation_s)
    return {"longest_phase_s": longest,
            "run_s": run.startup_s + run.run_s(norm=timed.computes_norm),
            "experiment_s": timed.submission_s, "computes_norm": timed.computes_norm}


def predict_time(job: Job, experiment: dict, repetitions: int, normed: set[str],
                 local: bool) -> None:
    """``job``'s predicted wall time (``experiment_time``), and its warning where its time
    limit is below it with ``TIME_MARGIN``."""
    predicted = experiment_time(experiment, job.ranks, repetitions, job.submissions, normed)
    if predicted is None:
        return
    job.time_model = "not calibrated" if isinstance(predicted, str) else "calibrated"
    if isinstance(predicted, str):
        return
    job.predicted_submission_s, job.predicted_s = predicted.submission_s, predicted.total_s
    job.extrapolation = predicted.extrapolation
    job.time_warning = time_warning(job, repetitions, local)


def time_warning(job: Job, repetitions: int, local: bool) -> str | None:
    """Why ``job``'s time limit is too short for its prediction with ``TIME_MARGIN``, and a
    limit that would do (``local``: the run option timeout, else slurm_time); None when it
    is long enough or unknown."""
    if job.time_limit_s is None or job.predicted_submission_s is None:
        return None
    return limit_warning(job.time_limit_s, job.predicted_submission_s, repetitions, local)


def limit_warning(limit_s: float, predicted_s: float, repetitions: int,
                  local: bool) -> str | None:
    """Why a time limit ``limit_s`` is too short for a submission predicted at
    ``predicted_s`` with ``TIME_MARGIN``, and a limit that would do; None when it is long
    enough."""
    needed = predicted_s * TIME_MARGIN
    if limit_s >= needed:
        return None
    predicted = f"predicted {duration_text(predicted_s)}"
    if local:  # the solver timeout, once per repetition, bounds a local run
        advice = f"set the run option timeout to at least " \
                 f"{advised_timeout_s(predicted_s, repetitions)}s"
    else:
        minutes = math.ceil(needed / 60)
        advice = f"set slurm_time to at least {minutes // 60:02d}:{minutes % 60:02d}:00"
    return (f"time limit {duration_text(limit_s)} is below its {predicted} with a "
            f"{TIME_MARGIN - 1:.0%} margin: {advice}")


def advised_timeout_s(predicted_s: float, repetitions: int) -> int:
    """The run option timeout (per repetition) that leaves ``TIME_MARGIN`` over a local run
    of ``repetitions`` predicted at ``predicted_s``, in whole seconds."""
    return math.ceil(predicted_s * TIME_MARGIN / repetitions)


def launch_time_checks(grid: Config, experiments: list[dict]) -> dict[str, dict]:
    """Per experiment id of a ``scalebench run`` (one process per experiment, its timeout
    bounding each repetition), from the ``predicted`` times the expand child gave each
    (``experiment_prediction``): its timeout, its predicted run and the timeout that would
    do (None: not calibrated), whether it computes the operator norm, and plan's warning
    where the timeout is too short (``warning``, naming the experiment)."""
    timeout_s, repetitions = float(grid.option("timeout")), int(grid.option("n-repetitions"))
    if grid.raw.get("no-timeout"):
        return {}
    checks = {}
    for experiment in experiments:
        predicted = experiment.get("predicted")
        check = {"timeout_s": timeout_s, "predicted_s": None, "advised_timeout_s": None,
                 "computes_norm": None, "warning": None}
        if predicted:
            experiment_s = predicted["experiment_s"]
            warning = limit_warning(timeout_s * repetitions, experiment_s, repetitions,
                                    local=True)
            check.update(predicted_s=experiment_s,
                         advised_timeout_s=advised_timeout_s(experiment_s, repetitions),
                         computes_norm=predicted["computes_norm"],
                         warning=warning and f"experiment {experiment['id']} "
                                             f"({experiment['label']}): {warning}")
        checks[experiment["id"]] = check
    return checks


def hours_text(value: float) -> str:
    return f"{value:.2f}"


def predicted_cell(job: Job) -> str:
    """The job's predicted wall time, with how far it extrapolates; why there is none."""
    if job.predicted_s is None:
        return "n/a" if job.time_model == "none" else "not calibrated"
    text = duration_text(job.predicted_s)
    if job.extrapolation and job.extrapolation > EXTRAPOLATION_SHOWN:
        text += f" (x{job.extrapolation:.2g})"
    return text


def predicted_totals(plan: Plan, totals: dict) -> list[str]:
    """The predicted totals line and what the marks of the predicted column mean."""
    lines = []
    if totals["predicted_jobs"]:
        some = "" if totals["predicted_jobs"] == totals["jobs"] else \
            f" of the {totals['predicted_jobs']} calibrated job(s)"
        lines.append(f"predicted{some}: {duration_text(totals['predicted_s'])} wall time, "
                     f"{hours_text(totals['predicted_gpu_hours'])} GPU-hours, "
                     f"{hours_text(totals['predicted_cpu_core_hours'])} CPU core-hours")
    if any(job.extrapolation and job.extrapolation > EXTRAPOLATION_SHOWN for job in plan.jobs):
        lines.append("predicted: (xN) marks a prediction N times past its largest probe in "
                     "unknowns (calibrate nearer: scalebench capacity --time)")
    several = [job for job in plan.jobs
               if job.predicted_s is not None and leaves_out_communication(job.ranks)]
    if several:
        lines.append(f"predicted: {COMMUNICATION_NOT_INCLUDED} for the {len(several)} job(s) "
                     f"on several ranks")
    if any(job.time_model == "not calibrated" for job in plan.jobs):
        lines.append("predicted: 'not calibrated' marks a configuration without a time model; "
                     "`scalebench capacity CONFIG --memory BUDGET` calibrates it")
    return lines
