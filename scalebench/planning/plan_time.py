"""A job's predicted wall time in ``scalebench plan``: from the time model of its
configuration's cached calibration (``scalebench capacity``; "not calibrated" without one,
never a guess), its limit checked against it with ``TIME_MARGIN``, and how the table and its
totals show it."""

from __future__ import annotations

import math

from scalebench.planning.capacity.time_model import RunPrediction, duration_text
from scalebench.planning.jobs import Job, Plan

# A time limit must leave this much over the predicted time (run-to-run spread on shared
# cores is 5-20 %, docs/performance.md).
TIME_MARGIN = 1.2
# A prediction this many times past its largest probe says so.
EXTRAPOLATION_SHOWN = 1.05


def predict_time(job: Job, experiment: dict, repetitions: int, normed: set[str],
                 local: bool) -> None:
    """``job``'s predicted wall time from its configuration's cached time model, and its
    warning where its time limit is below it with ``TIME_MARGIN``; "not calibrated" without
    a model. A process starts once per submission; the operator norm is computed by the
    first run of its operators in the campaign (``normed``: the data sets whose norm an
    earlier job computed), later runs read it from the norm cache."""
    import json

    if not has_time_model(experiment):
        return
    run = experiment_run(experiment, job.ranks)
    job.time_model = "not calibrated" if run is None else "calibrated"
    if run is None:
        return
    (dataset, dataset_params), = experiment["dataset"].items()
    (_, solver_params), = experiment["solver"].items()
    key = json.dumps([dataset, dataset_params, solver_params.get("device"),
                      solver_params.get("num_threads")], sort_keys=True, default=str)
    first = key not in normed
    normed.add(key)
    per_submission = repetitions // job.submissions
    longest = run.startup_s + run.run_s(norm=first) + (per_submission - 1) * run.run_s(False)
    job.predicted_submission_s = longest
    job.predicted_s = longest + (job.submissions - 1) * (run.startup_s + run.run_s(False))
    job.extrapolation = run.extrapolation
    job.time_warning = time_warning(job, repetitions, local)


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


def experiment_prediction(experiment: dict, ranks: int) -> dict | None:
    """An expanded experiment's predicted times on ``ranks`` ranks, as the numbers the
    launcher reads (``scalebench.launch.liveness``): ``longest_phase_s``, the longest of the
    process start, the set-up, the operator norm (computed) and an iteration with its
    evaluation, and ``run_s``, one run from the process start; None without a calibrated
    time model."""
    run = experiment_run(experiment, ranks) if has_time_model(experiment) else None
    if run is None:
        return None
    longest = max(run.startup_s, run.setup_s, run.norm_s, run.iteration_s + run.evaluation_s)
    return {"longest_phase_s": longest, "run_s": run.startup_s + run.run_s(norm=True)}


def time_warning(job: Job, repetitions: int, local: bool) -> str | None:
    """Why ``job``'s time limit is too short for its prediction with ``TIME_MARGIN``, and a
    limit that would do (``local``: the run option timeout, else slurm_time); None when it
    is long enough or unknown."""
    if job.time_limit_s is None or job.predicted_submission_s is None:
        return None
    needed = job.predicted_submission_s * TIME_MARGIN
    if job.time_limit_s >= needed:
        return None
    predicted = f"predicted {duration_text(job.predicted_submission_s)}"
    if local:  # the solver timeout, once per repetition, bounds a local run
        advice = f"set the run option timeout to at least {math.ceil(needed / repetitions)}s"
    else:
        minutes = math.ceil(needed / 60)
        advice = f"set slurm_time to at least {minutes // 60:02d}:{minutes % 60:02d}:00"
    return (f"time limit {duration_text(job.time_limit_s)} is below its {predicted} with a "
            f"{TIME_MARGIN - 1:.0%} margin: {advice}")


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
    if any(job.time_model == "not calibrated" for job in plan.jobs):
        lines.append("predicted: 'not calibrated' marks a configuration without a time model; "
                     "`scalebench capacity CONFIG --memory BUDGET` calibrates it")
    return lines
