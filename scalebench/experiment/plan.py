"""``scalebench plan``: an experiment's exact list of jobs, checked before anything is submitted.

The grid is expanded and validated by the launcher's own ``expand`` step (one job per dataset x
solver parameter combination, in the order ``scalebench run`` runs them). Each job gets the
resources it will ask for: the solver's ``slurm_*`` parameters over the parallel config's
``slurm_*`` keys (benchopt's submitit backend merges them that way), or this machine's ranks
for a local run; an estimate of one rank's resident memory; and the command that runs it.
Every resource problem is reported, one line each, before anything is submitted.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalebench.errors import ConfigError, ScalebenchError
from scalebench.launch.resources import requested_ranks
from scalebench.runtime.devices import device_type

if TYPE_CHECKING:  # plan reads the rules only when it plans
    from scalebench.experiment.config import BenchmarkRules

# Resident memory of one rank before any data, a lower bound: Python with torch, deepinv and
# benchopt imported (the capacity probes' fitted baselines are 1.2-1.3 GiB on this CPU).
PROCESS_BASELINE_BYTES = 900 * 2**20
FLOAT_BYTES = 4
# Images every rank holds whatever the problem: the ground truth and the estimate.
CERTAIN_IMAGES = 2
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)(I?B)?$", re.IGNORECASE)
_ZERO_MEMORY = re.compile(r"^0*(\.0*)?\s*[KMGT]?(I?B)?$", re.IGNORECASE)
_MEMORY_UNITS = {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# Parallel-config keys besides submitit's own: benchopt's backend switch and worker count.
BENCHOPT_PARALLEL_KEYS = ("backend", "n_jobs")


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
    problems: list[str] = field(default_factory=list)
    # "calibrated" (scalebench capacity), "uncalibrated" (a lower bound) or "none"
    memory_model: str = "none"
    # Jobs the scheduler runs for it: benchopt's submitit backend submits one per repetition;
    # a local run is one process running every repetition.
    submissions: int = 1

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


@dataclass
class Plan:
    config: str
    parallel_config: str | None
    jobs: list[Job]

    @property
    def problems(self) -> list[str]:
        return [f"job {job.id} ({job.label}): {problem}" for job in self.jobs
                for problem in job.problems]

    @property
    def local(self) -> bool:
        """Whether the jobs run on this machine (no parallel config)."""
        return self.parallel_config is None

    def warnings(self, cores: int | None = None) -> list[str]:
        """Local jobs whose ranks x threads exceed this machine's cores (they run, slowly
        and with skewed timings): one line each."""
        cores = cores or machine_cores()
        if not self.local:
            return []
        return [f"job {job.id} ({job.label}) needs {job.ranks} rank(s) x {job.cpus_per_task} "
                f"thread(s) but this machine has {cores} core(s): ranks will share cores and "
                f"their timings will not be those of dedicated cores"
                for job in self.jobs if job.ranks * job.cpus_per_task > cores]

    def to_json(self) -> dict:
        jobs = [{**asdict(job), "gpu_hours": job.gpu_hours,
                 "cpu_core_hours": job.cpu_core_hours} for job in self.jobs]
        totals = {"jobs": len(jobs), "gpu_hours": sum(j.gpu_hours for j in self.jobs),
                  "cpu_core_hours": sum(j.cpu_core_hours for j in self.jobs)}
        return {"config": self.config, "parallel_config": self.parallel_config,
                "jobs": jobs, "totals": totals}


def slurm_time_seconds(value: str | int, where: str) -> float:
    """A SLURM time limit in seconds: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS."""
    match = _SLURM_TIME.match(str(value).strip())
    if not match:
        raise ConfigError(f"{where}: time limit {value!r} is not a SLURM time (minutes, MM:SS, "
                          f"HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)")
    days, first, second, third = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return ((int(days) * 24 + int(first)) * 60 + int(second or 0)) * 60 + int(third or 0)
    if third is not None:  # HH:MM:SS
        return (int(first) * 60 + int(second)) * 60 + int(third)
    return int(first) * 60 + int(second or 0)  # MM or MM:SS


def timeout_seconds(value: str | int | float) -> float:
    """A run option 'timeout' (seconds, or a number with s, m or h) in seconds."""
    text = str(value)
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1], 1)
    return float(text.rstrip("smh")) * scale


def memory_bytes(value: str | int | float, where: str, bare_unit: str = "M") -> int:
    """A memory amount in bytes: a positive number with a binary unit, K, M, G or T (also
    written KiB, KB, ..., all 1024-based as SLURM counts them) or B; a bare number counts
    ``bare_unit`` (SLURM's --mem: 'M'; a byte budget: 'B'). The rule of SLURM's memory
    requests and of ``scalebench capacity --memory`` alike."""
    match = _MEMORY.match(str(value).strip())
    if not match or isinstance(value, bool) or float(match.group(1)) <= 0:
        bare = "MiB" if bare_unit == "M" else "bytes"
        raise ConfigError(f"{where}: {value!r} is not a memory size: give a positive number "
                          f"with a unit K, M, G or T (binary, e.g. 80GiB, 512M), or bare "
                          f"{bare}")
    unit = match.group(2).upper() or ("B" if match.group(3) else bare_unit)
    return int(float(match.group(1)) * _MEMORY_UNITS[unit])


def node_memory_bytes(mem: str | int | float | None, where: str) -> int | None:
    """What a node offers a job asking for ``slurm_mem``; None when unknown: no request, or
    SLURM's 0 (the node's whole memory)."""
    if mem is None or _ZERO_MEMORY.match(str(mem).strip()):
        return None
    return memory_bytes(mem, where)


def gres_gpus(gres: str | None) -> int:
    """GPUs per node in a --gres value ('gpu:4', 'gpu:a100:4'); 0 when it names none."""
    for item in (gres or "").split(","):
        parts = item.strip().split(":")
        if parts[0] == "gpu":
            return int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return 0


def read_parallel_config(path: Path) -> dict[str, Any]:
    """A benchopt submitit parallel config, keys harmonised as benchopt does (slurm_<name>)."""
    from benchopt.parallel_backends.slurm_executor import harmonize_slurm_config
    from submitit import SlurmExecutor

    from scalebench.experiment.reading import read_yaml

    raw = read_yaml(path, "parallel config")
    if not isinstance(raw, dict) or raw.get("backend") != "submitit":
        raise ConfigError(f"parallel config {path} must be a mapping with 'backend: submitit' "
                          f"(the only backend that submits jobs with resources)")
    allowed = SlurmExecutor._valid_parameters()
    slurm = {key: value for key, value in raw.items() if key not in BENCHOPT_PARALLEL_KEYS}
    for key in slurm:
        if not key.startswith("slurm_"):
            raise ConfigError(f"parallel config {path}: unknown key '{key}' (allowed: "
                              f"{', '.join(BENCHOPT_PARALLEL_KEYS)} and slurm_<submitit option>)")
    merged = harmonize_slurm_config(slurm)
    unknown = sorted(key for key in merged if key.removeprefix("slurm_") not in allowed)
    if unknown:
        raise ConfigError(f"parallel config {path}: unknown key '{unknown[0]}' (allowed "
                          f"slurm_ options: {', '.join(sorted(allowed))})")
    for key in ("slurm_nodes", "slurm_ntasks_per_node", "slurm_gpus_per_node",
                "slurm_cpus_per_task"):
        value = merged.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ConfigError(f"parallel config {path}: '{key}' must be a positive integer, "
                              f"got {value!r}")
    if isinstance(merged.get("slurm_time"), int):  # YAML read 02:00:00 as seconds
        seconds = merged["slurm_time"]
        merged["slurm_time"] = f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:" \
                               f"{seconds % 60:02d}"
    for key, kinds in (("slurm_gres", (str,)), ("slurm_time", (str,)),
                       ("slurm_mem", (str, int, float))):
        value = merged.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise ConfigError(f"parallel config {path}: '{key}' must be "
                              f"{' or '.join(k.__name__ for k in kinds)}, got {value!r}")
    if "slurm_mem_gb" in slurm:  # submitit's mem_gb counts GB
        merged["slurm_mem"] = f"{slurm['slurm_mem_gb']}G"
    return merged


def machine_cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine (what a local run's ranks share)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@dataclass(frozen=True)
class MemoryEstimate:
    """One rank's memory: ``calibrated`` the peak the calibrated model predicts (scalebench
    capacity has calibrated the configuration), else a lower bound: the process baseline and
    the images every rank holds."""

    bytes: int
    calibrated: bool

    @property
    def model(self) -> str:
        return "calibrated" if self.calibrated else "uncalibrated"


def rank_memory_estimate(dataset: str, dataset_params: dict, solver: str,
                         solver_params: dict, ranks: int) -> MemoryEstimate | None:
    """One of ``ranks`` ranks' memory (MemoryEstimate); None when the dataset or the solver
    (training) has no size model."""
    from scalebench.experiment.capacity.calibration import calibrated_peak
    from scalebench.loops import SOLVERS
    from scalebench.params import resolved_parameters
    from scalebench.problems import PROBLEMS

    if solver not in SOLVERS or dataset not in PROBLEMS:  # training, or a solver file
        return None
    predicted = calibrated_peak(dataset, dataset_params, solver, solver_params, ranks)
    if predicted is not None:
        return MemoryEstimate(int(predicted), True)
    spec = PROBLEMS[dataset]
    shape = spec.image_shape(**resolved_parameters(dataset_params, spec.params))
    return MemoryEstimate(PROCESS_BASELINE_BYTES + CERTAIN_IMAGES * math.prod(shape)
                          * FLOAT_BYTES, False)


def memory_problem(estimate: MemoryEstimate | None, ranks: int, available: int | None,
                   holder: str = "the node") -> str | None:
    """Why ``ranks`` ranks of ``estimate`` each cannot fit in ``available`` bytes of
    ``holder``; None when they fit or a figure is unknown."""
    if estimate is None or available is None or estimate.bytes * ranks <= available:
        return None
    rank_bytes = estimate.bytes
    model = "calibrated" if estimate.calibrated else "uncalibrated lower bound"
    return (f"memory estimate {rank_bytes * ranks / 2**30:.1f} GiB per node ({ranks} rank(s) "
            f"x {rank_bytes / 2**30:.1f} GiB, {model}) is above {holder}'s "
            f"{available / 2**30:.1f} GiB")


def local_memory_problems(experiments: list[dict], ranks: Callable[[dict], int]) -> list[str]:
    """Experiments that cannot fit this machine's memory with ``ranks(experiment)`` ranks on
    it, one line each (``rank_memory_estimate``: calibrated, else a lower bound), checked
    before any rank starts."""
    available = machine_memory_bytes()
    problems = []
    for experiment in experiments:
        (dataset, dataset_params), = experiment["dataset"].items()
        (solver, solver_params), = experiment["solver"].items()
        count = ranks(experiment)
        estimate = rank_memory_estimate(dataset, dataset_params, solver, solver_params, count)
        problem = memory_problem(estimate, count, available, "this machine")
        if problem is not None:
            problems.append(f"experiment {experiment['label']}: {problem} (make the problem "
                            f"smaller, or run it on a larger machine)")
    return problems


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


def _job_problems(job: Job, experiment: dict, timeout_s: float, rules: BenchmarkRules,
                  specs: tuple[dict, dict]) -> list[str]:
    """Impossible combinations of a job's parameters and resources, one line each; ``specs``:
    the benchmark folder's problems and solvers (scalebench.experiment.benchmark_files)."""
    from scalebench.params import resolved_parameters

    (dataset, dataset_params), = experiment["dataset"].items()
    (solver, solver_params), = experiment["solver"].items()
    problems_specs, solvers = specs
    spec = problems_specs[dataset]
    values = resolved_parameters(dataset_params, spec.params)
    params = resolved_parameters(solver_params, solvers[solver].params)
    problems = []
    try:
        rules.check_pair(solvers[solver], spec, values, spec.image_shape(**values), params,
                         job.ranks)
    except ScalebenchError as error:
        problems.append(str(error))
    if job.gpus_per_node and job.ntasks_per_node > job.gpus_per_node:
        problems.append(f"{job.ntasks_per_node} tasks per node but {job.gpus_per_node} GPUs "
                        f"per node (one GPU per rank: lower slurm_ntasks_per_node or ask for "
                        f"more GPUs)")
    if job.time_limit_s is not None and job.time_limit_s < timeout_s:
        what = "timeout" if job.submissions > 1 else "timeout x repetitions"
        problems.append(f"time limit {job.time_limit_s:.0f} s is shorter than the solver "
                        f"{what} ({timeout_s:.0f} s): raise slurm_time or lower timeout")
    estimate = None if job.rank_memory_bytes is None else \
        MemoryEstimate(job.rank_memory_bytes, job.memory_model == "calibrated")
    memory = memory_problem(estimate, job.ntasks_per_node, job.node_memory_bytes)
    if memory is not None:
        problems.append(memory)
    return problems


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
              benchmark: Path | None = None, configs: Path | None = None) -> Plan:
    """Expand and validate ``config``; one Job per run. With ``configs``, each job's own
    one-run config is written there and its command runs that job alone. ``benchmark``:
    None for the repository's folder of the config's objective."""
    from scalebench.benchmarks import (
        FOLDER_BY_OBJECTIVE,
        choose_benchmark,
        config_objective,
    )
    from scalebench.experiment.benchmark_files import benchmark_problems, benchmark_solvers
    from scalebench.experiment.config import BENCHMARKS, RUN_OPTIONS
    from scalebench.experiment.expand import expand
    from scalebench.experiment.reading import read_yaml

    parallel = read_parallel_config(parallel_path) if parallel_path else None
    world = job_ranks({}, parallel, nproc)
    with tempfile.TemporaryDirectory(prefix="scalebench-plan-") as scratch:
        experiments = expand(config, world, configs or Path(scratch), benchmark=benchmark)
    objective = config_objective(read_yaml(Path(config), "config"))  # expand checked it
    folder = choose_benchmark(benchmark, FOLDER_BY_OBJECTIVE[objective].name)
    rules = BENCHMARKS[objective]
    specs = (benchmark_problems(folder, rules.problems), benchmark_solvers(folder, rules.solvers))
    jobs = []
    for experiment in experiments:
        options = {key: spec.default for key, spec in RUN_OPTIONS.items()}
        options.update(experiment["options"])
        command = _command(Path(experiment["config"]) if configs else config, folder,
                           benchmark is not None, parallel_path, nproc)
        jobs.append(_job(experiment, parallel, nproc, timeout_seconds(options["timeout"]),
                         options["n-repetitions"], command, rules, specs))
    return Plan(str(config), str(parallel_path) if parallel_path else None, jobs)


def _job(experiment: dict, parallel: dict | None, nproc: int, timeout_s: float,
         repetitions: int, command: list[str], rules: BenchmarkRules,
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
    job.problems = _job_problems(job, experiment, run_timeout_s, rules, specs)
    return job


def _hours(value: float) -> str:
    return f"{value:.2f}"


def format_text(plan: Plan) -> str:
    """The plan as a table, one line per job, and the campaign's totals."""
    header = f"{'job':16}  {'ranks':>5}  {'nodes':>5}  {'tasks/node':>10}  {'GPUs/node':>9}  " \
             f"{'time limit':>10}  {'memory/rank':>11}  run"
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
                     f"{job.gpus_per_node:>9}  {limit:>10}  {memory:>11}  {job.label}")
        lines.append(f"{'':16}  command: {' '.join(job.command)}")
    totals = plan.to_json()["totals"]
    lines.append(f"total: {totals['jobs']} job(s), {_hours(totals['gpu_hours'])} GPU-hours, "
                 f"{_hours(totals['cpu_core_hours'])} CPU core-hours (at the time limits)")
    if any(job.memory_model == "uncalibrated" for job in plan.jobs):
        lines.append("memory/rank: '>=' marks an uncalibrated lower bound (process and "
                     "images); `scalebench capacity CONFIG --memory BUDGET` calibrates it")
    if plan.local and plan.jobs:
        needed = sorted({job.ranks for job in plan.jobs})
        lines.append(f"ranks: {', '.join(map(str, needed))} per job, on this machine "
                     f"({machine_cores()} core(s))")
    return "\n".join(lines)
