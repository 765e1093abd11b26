"""One rank's memory, estimated before it starts: the calibrated peak of ``scalebench
capacity`` where there is one, else a lower bound (the process and the images every rank
holds). ``expand`` refuses, with it, experiments too large for this machine; ``plan`` shows it
for every job."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Resident memory of one rank before any data, a lower bound: Python with torch, deepinv and
# benchopt imported (the capacity probes' fitted baselines are 1.2-1.3 GiB on this CPU).
PROCESS_BASELINE_BYTES = 900 * 2**20
FLOAT_BYTES = 4
# Images every rank holds whatever the problem: the ground truth and the estimate.
CERTAIN_IMAGES = 2


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
    from scalebench.loops import SOLVERS
    from scalebench.param_spec import resolved_parameters
    from scalebench.planning.capacity.calibration_cache import calibrated_peak
    from scalebench.problems import PROBLEMS

    if solver not in SOLVERS or dataset not in PROBLEMS:  # training, or a benchmark file
        return None
    predicted = calibrated_peak(dataset, dataset_params, solver, solver_params, ranks)
    if predicted is not None:
        return MemoryEstimate(int(predicted), True)
    spec = PROBLEMS[dataset]
    shape = spec.image_shape(**resolved_parameters(dataset_params, spec.params))
    return MemoryEstimate(PROCESS_BASELINE_BYTES + CERTAIN_IMAGES * math.prod(shape)
                          * FLOAT_BYTES, False)


def memory_error(estimate: MemoryEstimate | None, ranks: int, available: int | None,
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


def local_memory_check(which: str, world_size: int) -> Callable[[list[dict]], list[str]]:
    """The check ``expand`` runs before it writes anything: experiments that cannot fit this
    machine's memory, one line each; ``which``: "all" of them (a local run), or "local" those
    that name no SLURM resources (the others run on compute nodes this machine knows nothing
    of)."""
    from scalebench.launch.resources import (
        experiment_ranks,
        experiment_solver_params,
        names_slurm_resources,
    )

    def check(experiments: list[dict]) -> list[str]:
        here = [e for e in experiments if which == "all"
                or not names_slurm_resources(experiment_solver_params(e))]
        return local_memory_errors(here, lambda e: experiment_ranks(e, world_size))

    return check


def local_memory_errors(experiments: list[dict], ranks: Callable[[dict], int]) -> list[str]:
    """Experiments that cannot fit this machine's memory with ``ranks(experiment)`` ranks on
    it, one line each (``rank_memory_estimate``: calibrated, else a lower bound), checked
    before any rank starts."""
    available = machine_memory_bytes()
    errors = []
    for experiment in experiments:
        (dataset, dataset_params), = experiment["dataset"].items()
        (solver, solver_params), = experiment["solver"].items()
        count = ranks(experiment)
        estimate = rank_memory_estimate(dataset, dataset_params, solver, solver_params, count)
        error = memory_error(estimate, count, available, "this machine")
        if error is not None:
            errors.append(f"experiment {experiment['label']}: {error} (make the problem "
                            f"smaller, or run it on a larger machine)")
    return errors
