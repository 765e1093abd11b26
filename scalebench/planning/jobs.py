"""A campaign's jobs, what each asks for (``Job``, ``Plan``), and the resources a job takes:
the solver's ``slurm_*`` parameters over the parallel config's, or this machine's ranks for a
local run. Read by ``plan`` (which makes them), ``plan_time`` (which predicts their time) and
the capacity command (which counts ranks as plan does)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from scalebench.launch.resources import requested_ranks
from scalebench.launch.slurm_requests import gres_gpus
from scalebench.rank.devices import device_type


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


def predicted_totals_json(jobs: list[Job]) -> dict:
    """The calibrated jobs' count, predicted wall time, GPU-hours and CPU core-hours."""
    calibrated = [job for job in jobs if job.predicted_s is not None]
    return {"predicted_jobs": len(calibrated),
            "predicted_s": sum(job.predicted_s for job in calibrated),
            "predicted_gpu_hours": sum(job.predicted_gpu_hours for job in calibrated),
            "predicted_cpu_core_hours": sum(job.predicted_cpu_core_hours
                                            for job in calibrated)}


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
