"""The link between benchopt's classes and scalebench's components.

The benchmark folders stay thin: each Dataset or Solver names a scalebench spec and inherits
validation and the measured loop from here.
"""

from __future__ import annotations

import os
import time
from abc import abstractmethod
from pathlib import Path

from benchopt import BaseDataset, BaseSolver
from benchopt.stopping_criterion import StoppingCriterion

from provenance.schema import column
from scalebench.determinism import apply_determinism, set_threads
from scalebench.distributed.context import run_context
from scalebench.distributed.ranks import check_same_on_every_rank, rank_statistics
from scalebench.params import Param, resolved_parameters, validate_parameters
from scalebench.problems import PROBLEMS, ProblemSetup, setup_problem
from scalebench.profiling import StepProfiler
from scalebench.solvers.common import (
    check_denoiser_fits,
    check_distribution,
    make_denoiser,
    resolve_device,
    warm_up,
)
from scalebench.stamping import run_record

# Testing hook for failure handling: the rank named here raises at its second iteration.
FAULT_VARIABLE = "SCALEBENCH_FAIL_RANK"


class ProblemDataset(BaseDataset):
    """A benchopt Dataset built by ``scalebench.problems.PROBLEMS[name]``."""

    def __init__(self, **parameters) -> None:
        validate_parameters(f"dataset '{self.name}'", parameters, PROBLEMS[self.name].params)
        super().__init__(**parameters)

    def get_data(self) -> dict:
        # Operators and measurements are built by the solver, on its rank and device.
        return dict(problem=setup_problem(self.name, **self._parameters))


class LoopSolver(BaseSolver):
    """A benchopt Solver running a scalebench loop for ``max_iter`` iterations.

    Every iteration is evaluated (``get_next``); the loop's ``x`` and its profiler's latest
    per-step figures (with their maximum and mean over ranks) are the result handed to the
    objective. On several ranks every rank runs the same loop; a stop that any rank's
    benchopt asks for (its timeout) is agreed by all, so no rank waits in a collective alone.
    """

    sampling_strategy = "callback"
    # Never stop on a flat curve: the run length is the solver's own ``max_iter``.
    stopping_criterion = StoppingCriterion(strategy="callback")
    param_specs: dict[str, Param] = {}
    # benchopt's own test suite (`benchopt test`) runs a few CPU iterations.
    test_config = {"max_iter": 3, "device": "cpu"}

    def __init__(self, **parameters) -> None:
        validate_parameters(f"solver '{self.name}'", parameters, self.param_specs)
        super().__init__(**parameters)

    def save_parameters(self, **parameters) -> None:
        super().save_parameters(**parameters)
        # An unset resource must not override the parallel config's value (benchopt hands
        # every slurm_* parameter to submitit), nor show as a parameter of the run.
        for key in [k for k, v in self._parameters.items()
                    if k.startswith("slurm_") and v is None]:
            del self._parameters[key]

    @property
    def params(self) -> dict:
        """Every parameter of the run (defaults filled in), unset resources left out."""
        resolved = resolved_parameters(self._parameters, self.param_specs)
        return {k: v for k, v in resolved.items() if k in self._parameters
                or not (k.startswith("slurm_") and v is None)}

    def set_objective(self, problem: ProblemSetup) -> None:
        start = time.perf_counter()
        params, shape = self.params, tuple(problem.x_true.shape[1:])
        check_denoiser_fits(params, shape)
        set_threads(params["num_threads"])
        apply_determinism(params["deterministic"], params["seed"])
        self.context = run_context(resolve_device(params["device"]))
        self.device = self.context.device
        check_distribution(params, shape, problem.num_operators, self.context.world_size)
        self.setup_problem(problem)
        self.denoiser = make_denoiser(params, shape, self.device, self.context)
        self.compile_time_s = warm_up(self.denoiser, shape, params["denoiser_sigma"],
                                      self.device) if params["compile"] else 0.0
        check_same_on_every_rank(self.context, self.denoiser, self.data_sha256)
        self.setup_time_s = time.perf_counter() - start

    @abstractmethod
    def setup_problem(self, problem: ProblemSetup) -> None:
        """Build what the loop needs of the problem; set ``self.data_sha256`` (its digest)."""

    @abstractmethod
    def make_loop(self, profiler: StepProfiler):
        """The loop object: has ``x`` and ``iterate()``, measured by ``profiler``."""

    def pre_run_hook(self, stop_val) -> None:
        # Set-up (operator norm, initial estimate) happens here, outside benchopt's clock:
        # the "time" column counts iterations only; set-up time is a figure of its own.
        start = time.perf_counter()
        mode, rank = self.params["profiler"], self.context.rank
        self.run_record = run_record(self.source, self.data_sha256, self.name, self.params,
                                     self.context)
        label = f" rank {rank}" if self.context.world_size > 1 else ""
        trace = self._trace_path() if mode == "torch" else None
        self.profiler = StepProfiler(self.device, mode, trace, self.context, label)
        self.loop = self.make_loop(self.profiler)
        self.context.comm_time_s, self.context.comm_bytes = 0.0, 0  # set-up is not an iteration
        self.setup_figures = {"setup_time_s": self.setup_time_s + time.perf_counter() - start,
                              "compile_time_s": self.compile_time_s,
                              **getattr(self.loop, "setup_figures", {})}

    def run(self, callback) -> None:
        failing_rank = os.environ.get(FAULT_VARIABLE)
        with self.profiler:
            for iteration in range(self.params["max_iter"]):
                if self.context.agree(not callback()):
                    return
                if iteration == 1 and failing_rank == str(self.context.rank):
                    raise RuntimeError(f"injected failure on rank {failing_rank} "
                                       f"({FAULT_VARIABLE})")
                self.loop.iterate()
            callback()

    def get_next(self, stop_val: int) -> int:
        return stop_val + 1

    def get_result(self) -> dict:
        stats = rank_statistics(self.context, self.profiler.last)
        return dict(x_hat=self.loop.x, step_stats={**stats, **self.setup_figures},
                    run_record=self.run_record)

    def _trace_path(self) -> Path:
        """``<run artefacts>/traces/<config hash>/rep_<k>/torch_trace[_rank<r>].json``.

        Named by the rows' config hash: benchopt's own per-run folder is named after every
        parameter and outgrows file-name limits.
        """
        context = getattr(self, "_run_context", None)
        base = getattr(context, "run_output_base", None)
        repetition = getattr(context, "repetition", 0)
        if base is None:  # no per-run folder (e.g. `benchopt test`)
            base = Path.cwd() / "outputs"
        digest = self.run_record[column("config_hash")][:16]
        name = "torch_trace.json" if self.context.world_size == 1 else \
            f"torch_trace_rank{self.context.rank}.json"
        return Path(base) / "traces" / digest / f"rep_{repetition}" / name
