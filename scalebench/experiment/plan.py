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

import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scalebench.errors import ScalebenchError
from scalebench.experiment.expand import expand
from scalebench.experiment.memory import (
    MemoryEstimate,
    machine_memory_bytes,
    memory_error,
    rank_memory_estimate,
)
from scalebench.experiment.plan_time import (
    hours_text,
    predict_time,
    predicted_cell,
    predicted_totals,
    predicted_totals_json,
)
from scalebench.launch.resources import requested_ranks
from scalebench.launch.slurm_requests import (
    gres_gpus,
    node_memory_bytes,
    read_parallel_config,
    slurm_time_seconds,
)
from scalebench.rank.devices import device_type

if TYPE_CHECKING:  # plan reads the rules only when it plans
    from scalebench.benchmarks import BenchmarkSpec


@dataclass
class Job:
    """One run of the campaign and what it asks for."""

    id: str
    label: str
    dataset: dict
    solver: dict
    nodes: int
    ntasks_per_node: int
    ranks: int
    gpus_per_node: int
    cpus_per_task: int
    time_limit_s: float | None  # of each submission
    # One rank's peak: the calibrated prediction, else a lower bound (memory_model says
    # which); None where there is no size model (training).
    rank_memory_bytes: int | None
    node_memory_bytes: int | None  # what one node offers (None: unknown)
    command: list[str]
    # Why the job cannot run, one line each (the JSON's key for scripts: 'problems').
    problems: list[str] = field(default_factory=list)
    # "calibrated" (scalebench capacity), "uncalibrated" (a lower bound) or "none"
    memory_model: str = "none"
    # Jobs the scheduler runs for it: benchopt's submitit backend submits one per repetition;
    # a local run is one process running every repetition.
    submissions: int = 1
    # Predicted wall time of the whole job (every submission) and of its longest submission;
    # None where its configuration has no time model ("not calibrated", or "none": training).
    predicted_s: float | None = None
    predicted_submission_s: float | None = None
    time_model: str = "none"
    extrapolation: float | None = None  # times past the largest probe (time_model)
    time_warning: str | None = None  # its limit below the prediction with TIME_MARGIN

    @property
    def gpu_hours(self) -> float:
        return self.submissions * self.nodes * self.gpus_per_node * \
            (self.time_limit_s or 0) / 3600

    @property
    def cpu_core_hours(self) -> float:
        if self.gpus_per_node:
            return 0.0
        return self.submissions * self.ranks * self.cpus_per_task * \
            (self.time_limit_s or 0) / 3600

    @property
    def predicted_gpu_hours(self) -> float | None:
        return None if self.predicted_s is None else \
            self.nodes * self.gpus_per_node * self.predicted_s / 3600

    @property
    def predicted_cpu_core_hours(self) -> float | None:
        return None if self.predicted_s is None else 0.0 if self.gpus_per_node else \
            self.ranks * self.cpus_per_task * self.predicted_s / 3600


@dataclass
class Plan:
    config: str
    parallel_config: str | None
    jobs: list[Job]
    strict: bool = False  # a time limit below its job's prediction is an error

    @property
    def errors(self) -> list[str]:
        return [f"job {job.id} ({job.label}): {error}" for job in self.jobs
                for error in [*job.problems, *([job.time_warning]
                                                if self.strict and job.time_warning else [])]]

    @property
    def local(self) -> bool:
        """Whether the jobs run on this machine (no parallel config)."""
        return self.parallel_config is None

    def warnings(self, cores: int | None = None) -> list[str]:
        """Jobs whose time limit is below their predicted time with ``TIME_MARGIN`` (errors
        instead with ``strict``), and local jobs whose ranks x threads exceed this machine's
        cores (they run, slowly and with skewed timings): one line each."""
        cores = cores or machine_cores()
        short = [f"job {job.id} ({job.label}): {job.time_warning}" for job in self.jobs
                 if job.time_warning and not self.strict]
        if not self.local:
            return short
        return short + [
            f"job {job.id} ({job.label}) needs {job.ranks} rank(s) x {job.cpus_per_task} "
            f"thread(s) but this machine has {cores} core(s): ranks will share cores and "
            f"their timings will not be those of dedicated cores"
            for job in self.jobs if job.ranks * job.cpus_per_task > cores]

    def to_json(self) -> dict:
        jobs = [{**asdict(job), "gpu_hours": job.gpu_hours,
                 "cpu_core_hours": job.cpu_core_hours,
                 "predicted_gpu_hours": job.predicted_gpu_hours,
                 "predicted_cpu_core_hours": job.predicted_cpu_core_hours}
                for job in self.jobs]
        totals = {"jobs": len(jobs), "gpu_hours": sum(j.gpu_hours for j in self.jobs),
                  "cpu_core_hours": sum(j.cpu_core_hours for j in self.jobs),
                  **predicted_totals_json(self.jobs)}
        return {"config": self.config, "parallel_config": self.parallel_config,
                "jobs": jobs, "totals": totals}


def timeout_seconds(value: str | int | float) -> float:
    """A run option 'timeout' (seconds, or a number with s, m or h) in seconds."""
    text = str(value)
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1], 1)
    return float(text.rstrip("smh")) * scale


def machine_cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _over_parallel(solver_params: dict, parallel: dict) -> dict:
    """The parallel config's slurm_* options with the solver's set ones over them."""
    return {**parallel, **{key: value for key, value in solver_params.items()
                           if key.startswith("slurm_") and value is not None}}


def job_resources(solver_params: dict, parallel: dict | None, nproc: int) -> dict:
    """Nodes, tasks, GPUs, CPUs and the time limit of a job (solver over parallel config)."""
    if parallel is None:  # a local run: this machine, --nproc ranks unless the solver says
        ranks = requested_ranks(solver_params, nproc)
        # A local run: 'auto' takes this machine's CUDA device when it has one.
        gpus = ranks if device_type(solver_params.get("device", "auto")) == "cuda" else 0
        threads = solver_params.get("num_threads") or 1
        return {"nodes": 1, "ntasks_per_node": ranks, "gpus_per_node": gpus,
                "cpus_per_task": threads, "time": None}
    merged = _over_parallel(solver_params, parallel)
    gpus = merged.get("slurm_gpus_per_node") or gres_gpus(merged.get("slurm_gres"))
    return {"nodes": merged.get("slurm_nodes") or 1,
            "ntasks_per_node": merged.get("slurm_ntasks_per_node") or 1,
            "gpus_per_node": gpus, "cpus_per_task": merged.get("slurm_cpus_per_task") or 1,
            "time": merged.get("slurm_time"), "mem": merged.get("slurm_mem")}


def job_ranks(solver_params: dict, parallel: dict | None, nproc: int) -> int:
    """The ranks a job runs on (``job_resources``: nodes x tasks per node), without looking
    for GPUs."""
    if parallel is None:
        return requested_ranks(solver_params, nproc)
    merged = _over_parallel(solver_params, parallel)
    return (merged.get("slurm_nodes") or 1) * (merged.get("slurm_ntasks_per_node") or 1)


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
    from scalebench.benchmarks import choose_benchmark, config_benchmark
    from scalebench.experiment.benchmark_files import benchmark_problems, benchmark_solvers
    from scalebench.experiment.config import RUN_OPTIONS
    from scalebench.experiment.reading import read_yaml

    parallel = read_parallel_config(parallel_path) if parallel_path else None
    world = job_ranks({}, parallel, nproc)
    with tempfile.TemporaryDirectory(prefix="scalebench-plan-") as scratch:
        experiments = expand(config, world, configs or Path(scratch), benchmark=benchmark)
    rules = config_benchmark(read_yaml(Path(config), "config"))  # expand checked it
    folder = choose_benchmark(benchmark, rules.folder)
    specs = (benchmark_problems(folder, rules.problems), benchmark_solvers(folder, rules.solvers))
    jobs, normed = [], set()
    for experiment in experiments:
        options = {key: spec.default for key, spec in RUN_OPTIONS.items()}
        options.update(experiment["options"])
        command = _command(Path(experiment["config"]) if configs else config, folder,
                           benchmark is not None, parallel_path, nproc)
        job = _job(experiment, parallel, nproc, timeout_seconds(options["timeout"]),
                   options["n-repetitions"], command, rules, specs)
        predict_time(job, experiment, options["n-repetitions"], normed, parallel is None)
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
