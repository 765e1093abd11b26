"""``scalebench plan``: an experiment's exact list of jobs, checked before anything is submitted.

The grid is expanded and validated by the launcher's own ``expand`` step (one job per dataset x
solver parameter combination, in the order ``scalebench run`` runs them). Each job gets the
resources it will ask for: the solver's ``slurm_*`` parameters over the parallel config's
``slurm_*`` keys (benchopt's submitit backend merges them that way), or this machine's ranks
for a local run; an estimate of one rank's resident memory; its predicted wall time, from the
time model of its configuration's calibration (``scalebench capacity``; "not calibrated"
without one, never a guess); and the command that runs it. Every resource problem is
reported, one line each, before anything is submitted; a time limit below a job's prediction
with ``TIME_MARGIN`` is a warning, an error with ``strict``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from scalebench.durations import slurm_time_seconds
from scalebench.errors import ScalebenchError
from scalebench.experiment.config import load_config
from scalebench.experiment.expand import expand_config
from scalebench.launch.slurm_requests import node_memory_bytes
from scalebench.planning.jobs import Job, Plan, job_ranks, job_resources, machine_cores
from scalebench.planning.memory import (
    MemoryEstimate,
    machine_memory_bytes,
    memory_error,
    rank_memory_estimate,
)
from scalebench.planning.parallel_config import read_parallel_config
from scalebench.planning.plan_time import (
    hours_text,
    predict_time,
    predicted_cell,
    predicted_totals,
)

if TYPE_CHECKING:  # plan reads the rules only when it plans
    from scalebench.benchmarks import BenchmarkSpec


def _job_errors(job: Job, experiment: dict, timeout_s: float, rules: BenchmarkSpec,
                specs: tuple[dict, dict]) -> list[str]:
    """Impossible combinations of a job's parameters and resources, one line each; ``specs``:
    the benchmark folder's problems and solvers (scalebench.experiment.benchmark_files)."""
    from scalebench.param_spec import resolved_parameters

    (dataset, dataset_params), = experiment["dataset"].items()
    (solver, solver_params), = experiment["solver"].items()
    datasets, solvers = specs
    spec = datasets[dataset]
    values = resolved_parameters(dataset_params, spec.params)
    params = resolved_parameters(solver_params, solvers[solver].params)
    errors = []
    try:
        rules.check_pair(solvers[solver], spec, values, spec.image_shape(**values), params,
                         job.ranks)
    except ScalebenchError as error:
        errors.append(str(error))
    if job.gpus_per_node and job.ntasks_per_node > job.gpus_per_node:
        errors.append(f"{job.ntasks_per_node} tasks per node but {job.gpus_per_node} GPUs "
                        f"per node (one GPU per rank: lower slurm_ntasks_per_node or ask for "
                        f"more GPUs)")
    if job.time_limit_s is not None and job.time_limit_s < timeout_s:
        what = "timeout" if job.submissions > 1 else "timeout x repetitions"
        errors.append(f"time limit {job.time_limit_s:.0f} s is shorter than the solver "
                        f"{what} ({timeout_s:.0f} s): raise slurm_time or lower timeout")
    estimate = None if job.rank_memory_bytes is None else \
        MemoryEstimate(job.rank_memory_bytes, job.memory_model == "calibrated")
    memory = memory_error(estimate, job.ntasks_per_node, job.node_memory_bytes)
    if memory is not None:
        errors.append(memory)
    return errors


def _command(config: Path, benchmark: Path, given: bool, parallel_path: Path | None,
             nproc: int) -> list[str]:
    """The job's command; ``given``: the benchmark folder was chosen by the user, so a
    local command names it (scalebench run finds the default one itself)."""
    if parallel_path is None:
        chosen = ["--benchmark", str(benchmark)] if given else []
        return ["scalebench", "run", str(config), *chosen, "--nproc", str(nproc)]
    return ["benchopt", "run", str(benchmark), "--config", str(config), "--parallel-config",
            str(parallel_path)]


def make_plan(config: Path, parallel_path: Path | None, nproc: int,
              benchmark: Path | None = None, configs: Path | None = None,
              strict: bool = False) -> Plan:
    """Expand and validate ``config``; one Job per run. With ``configs``, each job's own
    one-run config is written there and its command runs that job alone. ``benchmark``:
    None for the repository's folder of the config's objective. ``strict``: a time limit
    below its job's predicted time with ``TIME_MARGIN`` is an error."""
    from scalebench.benchmarks import choose_benchmark
    from scalebench.experiment.benchmark_files import benchmark_problems, benchmark_solvers

    parallel = read_parallel_config(parallel_path) if parallel_path else None
    grid = load_config(config, job_ranks({}, parallel, nproc), benchmark)  # the one read
    with tempfile.TemporaryDirectory(prefix="scalebench-plan-") as scratch:
        experiments = expand_config(grid, configs or Path(scratch))
    rules = grid.benchmark
    folder = choose_benchmark(benchmark, rules.folder)
    specs = (benchmark_problems(folder, rules.problems), benchmark_solvers(folder, rules.solvers))
    timeout_s, repetitions = grid.option("timeout"), grid.option("n-repetitions")
    jobs, normed = [], set()
    for experiment in experiments:
        command = _command(Path(experiment["config"]) if configs else config, folder,
                           benchmark is not None, parallel_path, nproc)
        job = _job(experiment, parallel, nproc, timeout_s, repetitions, command, rules, specs)
        predict_time(job, experiment, repetitions, normed, parallel is None)
        jobs.append(job)
    return Plan(str(config), str(parallel_path) if parallel_path else None, jobs, strict)


def _job(experiment: dict, parallel: dict | None, nproc: int, timeout_s: float,
         repetitions: int, command: list[str], rules: BenchmarkSpec,
         specs: tuple[dict, dict]) -> Job:
    """The job of ``experiment``: locally one process runs every repetition (bounded by
    timeout x repetitions); under submitit each repetition is a job of its own (bounded by
    slurm_time, else 1.5 x the timeout, benchopt's default)."""
    (dataset, dataset_params), = experiment["dataset"].items()
    (solver, solver_params), = experiment["solver"].items()
    resources = job_resources(solver_params, parallel, nproc)
    ranks = job_ranks(solver_params, parallel, nproc)
    where = f"job {experiment['id']}"
    if parallel is None:  # a local run: the solver timeout bounds it, this machine hosts it
        submissions, run_timeout_s = 1, timeout_s * repetitions
        limit, node_memory = run_timeout_s, machine_memory_bytes()
    else:  # benchopt's submitit default without slurm_time: 1.5 x the solver timeout
        submissions, run_timeout_s = repetitions, timeout_s
        limit = slurm_time_seconds(resources["time"], where) if resources["time"] else \
            1.5 * timeout_s
        node_memory = node_memory_bytes(resources["mem"], where)
    estimate = rank_memory_estimate(dataset, dataset_params, solver, solver_params, ranks)
    job = Job(experiment["id"], experiment["label"], experiment["dataset"],
              experiment["solver"], resources["nodes"], resources["ntasks_per_node"], ranks,
              resources["gpus_per_node"], resources["cpus_per_task"], limit,
              estimate.bytes if estimate else None, node_memory, command,
              memory_model=estimate.model if estimate else "none", submissions=submissions)
    job.problems = _job_errors(job, experiment, run_timeout_s, rules, specs)
    return job


def shared_command_reach(plan: Plan) -> str:
    """What the one command of a plan's jobs does with them: ``scalebench run`` runs every
    experiment in turn, each on its own ranks; benchopt's submitit backend submits each with
    its own resources."""
    if plan.local:
        return "runs every job above in turn, each on its ranks"
    return "submits every job above, each with its resources"


def format_text(plan: Plan) -> str:
    """The plan as a table, one line per job, and the campaign's totals."""
    header = f"{'job':16}  {'ranks':>5}  {'nodes':>5}  {'tasks/node':>10}  {'GPUs/node':>9}  " \
             f"{'time limit':>10}  {'predicted':>14}  {'memory/rank':>11}  run"
    # One command for every job (the config's own, not one config per job): said once.
    shared = len(plan.jobs) > 1 and len({tuple(job.command) for job in plan.jobs}) == 1
    lines = [f"{plan.config}: {len(plan.jobs)} job(s)"
             + (f" through {plan.parallel_config}" if plan.parallel_config else ""), header]
    for job in plan.jobs:
        limit = f"{job.time_limit_s / 3600:.2f} h" if job.time_limit_s else "-"
        if job.submissions > 1:  # one scheduler job per repetition
            limit = f"{job.submissions} x {limit}"
        memory = "n/a" if job.rank_memory_bytes is None else \
            f"{'' if job.memory_model == 'calibrated' else '>='}" \
            f"{job.rank_memory_bytes / 2**30:.2f} GiB"
        lines.append(f"{job.id:16}  {job.ranks:>5}  {job.nodes:>5}  {job.ntasks_per_node:>10}  "
                     f"{job.gpus_per_node:>9}  {limit:>10}  {predicted_cell(job):>14}  "
                     f"{memory:>11}  {job.label}")
        if not shared:
            lines.append(f"{'':16}  command: {' '.join(job.command)}")
    if shared:
        lines.append(f"command ({shared_command_reach(plan)}): {' '.join(plan.jobs[0].command)}")
    totals = plan.to_json()["totals"]
    lines.append(f"total: {totals['jobs']} job(s), {hours_text(totals['gpu_hours'])} GPU-hours, "
                 f"{hours_text(totals['cpu_core_hours'])} CPU core-hours (at the time limits)")
    lines.extend(predicted_totals(plan, totals))
    if any(job.memory_model == "uncalibrated" for job in plan.jobs):
        lines.append("memory/rank: '>=' marks an uncalibrated lower bound (process and "
                     "images); `scalebench capacity CONFIG --memory BUDGET` calibrates it")
    if plan.local and plan.jobs:
        needed = sorted({job.ranks for job in plan.jobs})
        lines.append(f"ranks: {', '.join(map(str, needed))} per job, on this machine "
                     f"({machine_cores()} core(s))")
    return "\n".join(lines)
