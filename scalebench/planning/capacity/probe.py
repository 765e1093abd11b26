"""One short run of an inference experiment in a fresh process, and its peak memory in each
of its two phases.

The run takes the benchmark's own path: the benchmark folder's Dataset, Objective and Solver
classes, as benchopt calls them (data, set-up with the operator norm and the initial
estimate, ``iterations`` iterations, one evaluation of the result). The operator norm runs
``NORM_APPLICATIONS`` applications at most, computed whether cached or not: their memory is
the whole estimate's, within the run's noise, their cost a fraction of it. Where the image's
arrays are mapped, the norm and TV's inner iterations run ``MAPPED_REPETITIONS``. No step resets
the peaks. All of this is the probe's ``ProcessSettings`` (scalebench.rank.settings),
installed for the run and gone when it ends (``probe_settings``). The set-up's peak is read
when the set-up ends, which hands back the memory it freed (``release_freed_memory``); the
peaks are then reset and read again at the end: the iterations' peak. Each is the
process's high-water mark on the host (VmHWM, the process baseline included) and on CUDA (the
caching allocator's peak reserved memory, what the device gives the process). Where the
host peak cannot be reset (no ``/proc/self/clear_refs``: macOS, some sandboxes), the
iterations' host peak is the process's lifetime peak, ``host_method`` says so: one above the
set-up's is the iterations' own, one equal to it only says that the iterations' own is not
larger.

The same run is timed for the time model (``timing``): the set-up's wall time (data, operators,
operator norm, initial estimate; the norm's own seconds and applications beside it, as the
probe caps them, and the applications a run stops at, at most), each profiled step's seconds
in every iteration (device synchronised by the profiler, on CUDA as on the CPU), the
evaluation's, and the factor by which a cut TV ran fewer
inner iterations than a run's (its denoiser's time is scaled by it).

    python -m scalebench.planning.capacity.probe REQUEST_JSON    (prints one JSON line)
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

from scalebench.benchmarks import INFERENCE
from scalebench.errors import CommandFailed, ScalebenchError
from scalebench.experiment.benchmark_files import imported_class
from scalebench.planning.capacity.allocator import image_mapped
from scalebench.rank.devices import device_type
from scalebench.rank.names import HOST_PEAK_LIFETIME
from scalebench.rank.settings import ProcessSettings, installed

# Applications of A^T A (and of a start operator's) the probe's operator norm runs at most
# (ProcessSettings.norm_applications). Below glibc's mmap threshold each application
# leaves the heap a little more fragmented until it settles: super-resolution, 4 frames,
# whose Lanczos runs all 30, measured at 1024 a high-water mark of 1392, 1416, 1437, 1461,
# 1473 MiB after 1, 2, 4, 5, 6 applications, 1473 after 10 and 1480 from 17 to 30; at 2048
# (its vectors mapped), 1880 after 1, 1917 from 3 to 17, 1929 from 18 to 30. The run's own
# noise is about 30 MiB: ten applications keep the set-up's peak within it, at a third of
# the cost of thirty (the norm took 41 s of the 1024 probe's 72 s).
NORM_APPLICATIONS = 10
# Where the image's arrays are mapped on their own (allocator.image_mapped), a repeated step
# leaves nothing behind in the heap: the norm's applications and TV's inner iterations (the
# same arrays each time) are cut to this many. CT with ASTRA, 256 angles, TV: the probe at
# 2048 spent 30 s of its 76 on the norm and 14 s on TV's 2 x 50 inner iterations; at 3038,
# cut, it measured (set-up, iterations) peaks of 1298 and 1440 MiB in 165 s on the idle
# machine, uncut 1338 and 1445 MiB. A verification runs whole (``run_probe``).
MAPPED_REPETITIONS = 3
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeResult:
    """What one probe measured: peaks in bytes of the set-up and of the iterations
    (``device_peaks_bytes`` None off CUDA), and the run's unknowns (ground-truth values) and
    measurements (values of y, all operators)."""

    host_peaks_bytes: tuple[int, int]
    device_peaks_bytes: tuple[int, int] | None
    unknowns: int
    measurements: int
    host_method: str  # rank.names.HOST_METHODS: how the iterations' host peak was read
    timing: dict  # what the run's phases and steps took (``_timing``; time_model.Timing)

    def iterations_peak_bounded(self, device: str) -> bool:
        """Whether the iterations' own peak on ``device`` is unknown, only bounded by the
        set-up's: a lifetime host peak (none reset) that the iterations did not raise."""
        return device == "cpu" and self.host_method == HOST_PEAK_LIFETIME and \
            self.host_peaks_bytes[1] <= self.host_peaks_bytes[0]

    def peaks_bytes(self, device: str) -> tuple[int, int]:
        """The (set-up, iterations) peaks that a memory budget of ``device`` ('cpu' or
        'cuda') bounds."""
        if device == "cuda":
            if self.device_peaks_bytes is None:
                raise ScalebenchError("the probe ran on the CPU: it has no CUDA peak")
            return self.device_peaks_bytes
        return self.host_peaks_bytes


def _values(y: Any) -> int:
    """Number of values of a tensor or of a (nested) list of tensors."""
    import torch

    if isinstance(y, torch.Tensor):
        return y.numel()
    return sum(_values(part) for part in y)


def probe_settings(whole: bool, mapped: bool,
                   chunk_elements: int | None = None) -> ProcessSettings:
    """What a probe's process runs under: no step resets the peaks; the norm capped at
    ``NORM_APPLICATIONS`` (a verification's ``whole`` run: at the norm's own limit), the norm
    and TV cut to ``MAPPED_REPETITIONS`` where the image is ``mapped`` (never in a whole run);
    ``chunk_elements``: the chunked operators' limit (None: their own)."""
    from scalebench.rank.operator_norm import MAX_ITERATIONS

    cut = mapped and not whole
    return ProcessSettings(
        step_peak_resets=False,
        norm_applications=MAPPED_REPETITIONS if cut else
        MAX_ITERATIONS if whole else NORM_APPLICATIONS,
        tv_iterations=MAPPED_REPETITIONS if cut else None,
        chunk_elements=chunk_elements)


def run_probe(dataset: str, dataset_params: dict, solver: str, solver_params: dict,
              iterations: int, chunk_elements: int | None = None,
              whole: bool = False) -> ProbeResult:
    """The experiment's short run in this process (a fresh one: peaks are the process's)
    under ``probe_settings``, which end with it; ``chunk_elements``: the chunk limit of the
    operators that work in chunks; ``whole``: no repetition cut (a verification's run): the
    norm computed to its tolerance as a run without a cached norm computes it, TV's every
    inner iteration."""
    folder = INFERENCE.path
    data_class = imported_class(folder / "datasets" / f"{dataset}.py", "Dataset")
    solver_class = imported_class(folder / "solvers" / f"{solver}.py", "Solver")
    objective = imported_class(folder / "objective.py", "Objective").get_instance()
    started = time.perf_counter()
    # The data's measurements apply the chunked operators: their limit holds from the start.
    with installed(probe_settings(whole, False, chunk_elements)):
        objective.set_data(**data_class.get_instance(**dataset_params).get_data())
        # A one-shot solver (FBP: max_iter at most 1) runs its one iteration.
        iterations = min(iterations, solver_class.param_specs["max_iter"].maximum or iterations)
        run = solver_class.get_instance(**{**solver_params, "max_iter": iterations})
        mapped = image_mapped(objective.problem.x_true.numel(),
                              device_type(run.params["device"]))
        settings = probe_settings(whole, mapped, chunk_elements)
        with installed(settings):  # before the denoiser is built
            result = _measured(objective, run, iterations, started, settings)
    # The time model's regime (time_laws.regime_fit): a mapped image's steps cost more per
    # pixel.
    return replace(result, timing={**result.timing, "image_mapped": mapped})


def _measured(objective: Any, run: Any, iterations: int, started: float,
              settings: ProcessSettings) -> ProbeResult:
    """The set-up's and the iterations' peaks of ``run`` on ``objective``, and their times
    (``started``: when the set-up began, the data's loading included)."""
    import torch

    from scalebench.rank.operator_norm import MAX_ITERATIONS as NORM_LIMIT
    from scalebench.rank.profiling import MIB, HostPeakMemory, synchronize

    run._set_objective(objective)
    run.pre_run_hook(iterations)  # the set-up ends here, its freed memory handed back
    synchronize(run.device)
    setup_s = time.perf_counter() - started
    cuda = run.device.type == "cuda"

    def peaks(host: HostPeakMemory) -> tuple[int, int | None]:
        """(host, CUDA) high-water marks since the last reset."""
        return (round(host.read_mib() * MIB),
                torch.cuda.max_memory_reserved(run.device) if cuda else None)

    setup = peaks(HostPeakMemory(resets=False))  # nothing reset yet: the process's peak
    host = HostPeakMemory()  # resets the host peak where the system allows it
    if cuda:
        torch.cuda.reset_peak_memory_stats(run.device)
    steps: dict[str, list[float]] = {}
    for _ in range(iterations):
        run.loop.iterate()
        for name, seconds in step_seconds(run.profiler.last).items():
            steps.setdefault(name, []).append(seconds)
    evaluated = time.perf_counter()
    objective.evaluate_result(**run.get_result())
    synchronize(run.device)
    evaluation_s = time.perf_counter() - evaluated
    looped = peaks(host)
    measurements = _values(run.problem.y) if hasattr(run, "problem") else 0
    timing = {"setup_s": setup_s, "steps": steps, "evaluation_s": evaluation_s,
              "norm_s": float(run.setup_figures.get("operator_norm_time_s", 0.0)),
              # Of norm_s, the start operator's: not scaled with the whole operator's.
              "norm_start_s": float(run.setup_figures.get("operator_norm_start_time_s", 0.0)),
              # The whole A^T A's applications: what the time model scales a capped norm by.
              # A start operator's (CT: a tenth of the cost each) are counted apart: scaled
              # with them, a probe whose start was cut to 3 counted 6 where the run's 8 start
              # and 2 whole applications cost less (CT's set-up at 5146 predicted 1.63x).
              "norm_applications": int(run.setup_figures.get("operator_norm_iterations", 0)),
              "norm_start_applications":
                  int(run.setup_figures.get("operator_norm_start_iterations", 0)),
              "norm_capped": settings.norm_applications is not None
              and int(run.setup_figures.get("operator_norm_iterations", 0))
              >= settings.norm_applications,
              "norm_limit": NORM_LIMIT,
              "denoise_scale": tv_scale(settings, run.params.get("denoiser"))}
    return ProbeResult((setup[0], looped[0]),
                       (setup[1], looped[1]) if cuda else None,
                       objective.problem.x_true.numel(), measurements, host.method, timing)


def step_seconds(figures: dict[str, float]) -> dict[str, float]:
    """Each step's seconds in the profiler's latest iteration (``<step>_time_s``; the time
    its collectives took, ``<step>_comm_time_s``, is inside it, none on one rank)."""
    suffix = "_time_s"
    return {key[:-len(suffix)]: value for key, value in figures.items()
            if key.endswith(suffix) and not key.endswith("comm_time_s")}


def tv_scale(settings: ProcessSettings, denoiser: str | None) -> float:
    """A run's TV inner iterations over the probe's (1 where the probe cut none, or the
    denoiser is not TV): a TV call's time is its inner iterations', each costing the same."""
    from scalebench.denoisers.kinds.tv import ITERATIONS

    if settings.tv_iterations is None or denoiser != "tv":
        return 1.0
    return ITERATIONS / settings.tv_iterations


def children_cpu_seconds() -> float:
    """User and system CPU time of this process's finished children so far: a probe's work
    whatever the machine's load, where its wall time depends on the load."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def probe(dataset: str, dataset_params: dict, solver: str, solver_params: dict,
          iterations: int = 2, timeout_s: float = 3600,
          chunk_elements: int | None = None, whole: bool = False) -> ProbeResult:
    """``run_probe`` in a fresh process on one rank; a failure is a ScalebenchError naming
    the run and the last line the process printed. Each probe's wall and CPU time go to this
    module's logger (INFO), for whoever times calibrations (tools/capacity_check.py)."""
    request = json.dumps({"dataset": dataset, "dataset_params": dataset_params,
                          "solver": solver, "solver_params": solver_params,
                          "iterations": iterations, "chunk_elements": chunk_elements,
                          "whole": whole})
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR")}
    started, cpu_started = time.monotonic(), children_cpu_seconds()
    done = subprocess.run([sys.executable, "-m", "scalebench.planning.capacity.probe", request],
                          capture_output=True, text=True, env=environment, timeout=timeout_s,
                          check=False)
    wall = time.monotonic() - started
    LOG.info("probe of %s %s x %s: %.0f s wall, %.0f s CPU", dataset, dataset_params, solver,
             wall, children_cpu_seconds() - cpu_started)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CommandFailed(f"the memory probe of {dataset} {dataset_params} x {solver} "
                              f"failed: {last}")
    fields = json.loads(done.stdout.strip().splitlines()[-1])
    timing = fields["timing"]
    # What the process spent outside the run itself: interpreter, imports, start-up.
    inside = timing["setup_s"] + sum(map(sum, timing["steps"].values())) + \
        timing["evaluation_s"]
    timing["startup_s"] = max(wall - inside, 0.0)
    return ProbeResult(tuple(fields["host_peaks_bytes"]),
                       None if fields["device_peaks_bytes"] is None
                       else tuple(fields["device_peaks_bytes"]),
                       fields["unknowns"], fields["measurements"], fields["host_method"],
                       timing)


def main(argv: list[str]) -> int:
    request = json.loads(argv[0])
    result = run_probe(request["dataset"], request["dataset_params"], request["solver"],
                       request["solver_params"], request["iterations"],
                       request["chunk_elements"], request["whole"])
    print(json.dumps(result.__dict__))
    return 0


if __name__ == "__main__":
    from scalebench.rank.startup import import_and_freeze

    import_and_freeze()  # as a run's process starts (python -m scalebench.benchopt_glue)
    sys.exit(main(sys.argv[1:]))
