"""The link between benchopt's classes and scalebench's components.

The benchmark folders stay thin: each Dataset or Solver names a scalebench spec and inherits
validation and the measured loop from here.
"""

from __future__ import annotations

import math
import os
import time
from abc import abstractmethod
from pathlib import Path

import torch
from benchopt import BaseDataset, BaseSolver
from benchopt.stopping_criterion import StoppingCriterion

from provenance.schema import column
from provenance.stop_reasons import (
    COMPLETE,
    DIVERGED,
    ITERATION_COLUMN,
    PRUNED,
    REASON_COLUMN,
    TIME_LIMIT,
)
from scalebench.benchmarks import INFERENCE
from scalebench.launch import progress
from scalebench.launch.progress import enabled as reporting_progress
from scalebench.param_spec import (
    Param,
    omitted,
    renamed_parameters,
    resolved_parameters,
    validate_parameters,
)
from scalebench.problems import PROBLEMS, setup_problem
from scalebench.problems.base import ProblemSetup
from scalebench.rank.context import resolve_device, run_context
from scalebench.rank.determinism import apply_determinism, set_threads
from scalebench.rank.profiling import StepProfiler, release_freed_memory
from scalebench.rank.rank_checks import check_same_on_every_rank, rank_statistics
from scalebench.rank.stamping import NO_WEIGHTS, run_provenance
from scalebench.rank.trial_report import TrialReport, trial_report
from scalebench.results.estimates import save_estimates

# Testing hook for failure handling: the rank named here raises at its second iteration.
FAULT_VARIABLE = "SCALEBENCH_FAIL_RANK"


def given_parameters(component: BaseDataset | BaseSolver) -> dict:
    """The parameters benchopt gave a dataset or solver (benchopt 1.10 keeps them in its
    private ``_parameters``; {} for a bare instance): the one place that reads them."""
    return getattr(component, "_parameters", {})


def run_context_value(solver: BaseSolver, name: str, default):
    """A field of the run benchopt is running (``repetition``, ``run_output_base``), from its
    private ``_run_context``; ``default`` outside a benchopt run (``benchopt test``)."""
    return getattr(getattr(solver, "_run_context", None), name, default)


class ProblemDataset(BaseDataset):
    """A benchopt Dataset built by ``problems[name]``."""

    problems = PROBLEMS  # the registry of the benchmark's problems (scalebench.problems)

    def __init__(self, **parameters) -> None:
        owner, spec = f"dataset '{self.name}'", self.problems[self.name]
        parameters = renamed_parameters(owner, parameters, spec.renamed)
        validate_parameters(owner, parameters, spec.params)
        super().__init__(**parameters)

    def get_data(self) -> dict:
        # Operators and measurements are built by the solver, on its rank and device.
        progress.stage("loading the problem")
        return dict(problem=setup_problem(self.name, problems=self.problems,
                                          **given_parameters(self)))


class IterationCriterion(StoppingCriterion):
    """Runs to the solver's ``max_iter`` (never stops on a flat curve), ends a diverged run,
    and shows progress in iterations of ``max_iter`` rather than in evaluations of max-runs
    (under ``scalebench run`` the solver reports them itself: scalebench.launch.progress).
    """

    iteration = 0  # latest evaluated iteration

    def check_convergence(self, objective_list: list[dict]) -> tuple[bool, float]:
        last = objective_list[-1]
        self.iteration = int(last["stop_val"])
        max_iter = self.solver.params["max_iter"]
        # A diverged estimate is recorded (NaN metrics) and ends its run, not the grid; so
        # does a tuning trial its study prunes (rank 0 asks; the ranks agree on any stop).
        pruned = self.solver.trial_pruned(last, self.iteration, max_iter)
        return bool(last.get("objective_diverged", False)) or pruned, self.iteration / max_iter

    def progress(self, progress) -> None:
        if reporting_progress():
            return  # benchopt's line would repeat the solver's own reports
        if isinstance(progress, float):
            progress = f"iteration {self.iteration}/{self.solver.params['max_iter']}"
        super().progress(progress)


def callback_rows(callback) -> list[dict]:
    """The rows benchopt's callback has evaluated so far in this run (benchopt 1.10 keeps
    them in its ``curve`` and writes them once ``run`` returns): the one place that reads
    them."""
    return callback.curve


def run_stop_reason(diverged: bool, iteration: int, max_iter: int,
                    pruned: bool = False) -> str:
    """Why a run that evaluated ``iteration`` last ended: its estimate diverged; its tuning
    study pruned it; it reached its max_iter; else benchopt stopped it early, which it does
    only at a limit of the run (the config's timeout; its max-runs, which the config checks
    keep above the evaluations)."""
    if diverged:
        return DIVERGED
    if pruned:
        return PRUNED
    return COMPLETE if iteration >= max_iter else TIME_LIMIT


def mark_stop(rows: list[dict], agree, max_iter: int, pruned: bool = False) -> None:
    """Give every row of a run how the run ended (``provenance.stop_reasons``): rows are
    evaluated before the end is known. The last row is the last iteration evaluated (the
    loop's final callback always evaluates: ``get_next``). ``agree`` (the rank context's)
    makes a divergence any rank saw everyone's; ``pruned`` (rank 0 asks its study) needs no
    agreement: only rank 0's rows are kept."""
    last = rows[-1] if rows else {}
    diverged = agree(bool(last.get("objective_diverged", False)))
    if not rows:
        return
    iteration = int(last["stop_val"])
    reason = run_stop_reason(diverged, iteration, max_iter, pruned)
    for row in rows:
        row[REASON_COLUMN], row[ITERATION_COLUMN] = reason, iteration


class LoopSolver(BaseSolver):
    """A benchopt Solver running a scalebench loop for ``max_iter`` iterations.

    Every ``eval_every``-th iteration is evaluated, and always the first and the last
    (``get_next``); the loop's ``x`` and its profiler's latest per-step figures (with their
    maximum and mean over ranks) are the result handed to the objective. On several ranks every
    rank runs the same loop; a stop that any rank's benchopt asks for (its timeout, or a
    diverged estimate) is agreed by all, so no rank waits in a collective alone.
    """

    sampling_strategy = "callback"
    # Run length is the solver's own ``max_iter``; a diverged run stops early.
    stopping_criterion = IterationCriterion(strategy="callback")
    param_specs: dict[str, Param] = {}
    # The benchmark folder and objective its rows' provenance names (replay re-runs them).
    benchmark_name, objective_name = INFERENCE.folder, INFERENCE.objective
    # benchopt's own test suite (`benchopt test`) runs a few CPU iterations.
    test_config = {"max_iter": 3, "device": "cpu"}
    # Which denoiser weights ran (stamping.NO_WEIGHTS where none are loaded); set by build.
    weights_record: dict[str, str] = NO_WEIGHTS
    # The tuning trial a run belongs to (None outside scalebench tune) and whether its study
    # stopped it; set by run.
    trial: TrialReport | None = None
    pruned: bool = False

    def __init__(self, **parameters) -> None:
        owner = f"solver '{self.name}'"
        # Old parameter names of the solver's spec (scalebench.loops.spec), where it has one.
        parameters = renamed_parameters(owner, parameters,
                                        getattr(getattr(self, "spec", None), "renamed", {}))
        validate_parameters(owner, parameters, self.param_specs)
        super().__init__(**parameters)

    def save_parameters(self, **parameters) -> None:
        super().save_parameters(**parameters)
        # An unset resource must not override the parallel config's value (benchopt hands
        # every slurm_* parameter to submitit), nor show as a parameter of the run; neither
        # does any other parameter left out while null (Param.omitted_at_default).
        given = given_parameters(self)
        for key in [k for k, v in given.items() if omitted(k, v, self.param_specs)]:
            del given[key]

    @property
    def params(self) -> dict:
        """Every parameter of the run (defaults filled in), those left out while null
        (unset resources, Param.omitted_at_default) left out."""
        given = given_parameters(self)
        resolved = resolved_parameters(given, self.param_specs)
        return {k: v for k, v in resolved.items()
                if k in given or not omitted(k, v, self.param_specs)}

    def set_objective(self, problem: ProblemSetup) -> None:
        start = time.perf_counter()
        params = self.params
        set_threads(params["num_threads"])
        apply_determinism(params["deterministic"], params["seed"])
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            progress.stage("connecting the ranks")
        self.context = run_context(resolve_device(params["device"]))
        self.device = self.context.device
        self.source = problem.source  # what made the data: each row's provenance names it
        shared = self.build(problem)
        check_same_on_every_rank(self.context, shared, self.data_sha256)
        self.setup_time_s = time.perf_counter() - start

    @abstractmethod
    def build(self, problem: ProblemSetup) -> torch.nn.Module:
        """Checks and set-up of a run, once threads, determinism and ranks are set; sets
        ``data_sha256`` (the digest of the data the run holds) and ``compile_time_s``;
        returns the module every rank must hold identically."""

    @abstractmethod
    def make_loop(self, profiler: StepProfiler):
        """The loop object: has ``x`` and ``iterate()``, measured by ``profiler``."""

    def pre_run_hook(self, stop_val) -> None:
        # Set-up (operator norm, initial estimate) happens here, outside benchopt's clock:
        # the "time" column counts iterations only; set-up time is a figure of its own.
        start = time.perf_counter()
        progress.stage("preparing the loop")
        mode, rank = self.params["profiler"], self.context.rank
        self.run_provenance = run_provenance(
            self.source, self.data_sha256, self.name, self.params, self.context,
            self.benchmark_name, self.objective_name, self.weights_record)
        label = f" rank {rank}" if self.context.world_size > 1 else ""
        trace = self._trace_path() if mode == "torch" else None
        self.profiler = StepProfiler(self.device, mode, trace, self.context, label)
        self.loop = self.make_loop(self.profiler)
        self.context.comm_time_s, self.context.comm_bytes = 0.0, 0  # set-up is not an iteration
        release_freed_memory(self.device)  # the iterations' peaks start from what is held
        self.setup_figures = {"setup_time_s": self.setup_time_s + time.perf_counter() - start,
                              "compile_time_s": self.compile_time_s,
                              "host_memory_method": self.profiler.host_method,
                              **getattr(self.loop, "setup_figures", {})}

    def run(self, callback) -> None:
        failing_rank, max_iter = os.environ.get(FAULT_VARIABLE), self.params["max_iter"]
        self.trial, self.pruned = trial_report(), False
        initial = self.estimate()  # the estimate of the first row
        reports = progress.IterationReports(max_iter)
        reports.iteration(0)
        with self.profiler:
            try:
                for iteration in range(max_iter):
                    if self.context.agree(not callback()):
                        break
                    if iteration == 1 and failing_rank == str(self.context.rank):
                        raise RuntimeError(f"injected failure on rank {failing_rank} "
                                           f"({FAULT_VARIABLE})")
                    self.loop.iterate()
                    reports.iteration(iteration + 1)
                else:
                    callback()
            finally:
                reports.flush()  # a failure names the iteration it happened after
        mark_stop(callback_rows(callback), self.context.agree, max_iter, self.pruned)
        if initial is not None:
            save_estimates(self.params["save_estimate"], self.context.rank, self._artefacts(),
                           self.ground_truth, initial, self.estimate(), self.data_sha256)

    def trial_pruned(self, row: dict, iteration: int, max_iter: int) -> bool:
        """Whether the tuning study this run is a trial of stops it at ``row`` (rank 0 asks
        it; False outside a tuning and on the other ranks, which follow rank 0)."""
        if self.trial is None or self.context.rank != 0:
            return False
        from scalebench.problems import image_of

        image = image_of(self.source["name"], self.source["params"])
        self.pruned = self.trial.should_stop(image, iteration, max_iter,
                                             float(row.get(self.trial.metric, math.nan)))
        return self.pruned

    def estimate(self) -> torch.Tensor | None:
        """The loop's current image estimate (None where a run has none to keep)."""
        return self.loop.x

    def get_next(self, stop_val: int) -> int:
        # The iteration evaluated after ``stop_val``: eval_every later, never past the last.
        return min(stop_val + self.params["eval_every"], self.params["max_iter"])

    def get_result(self) -> dict:
        stats = rank_statistics(self.context, self.profiler.last)
        return dict(x_hat=self.loop.x, step_stats={**stats, **self.setup_figures},
                    run_provenance=self.run_provenance)

    def _trace_path(self) -> Path:
        """``<run artefacts>/traces/<config hash>/rep_<k>/torch_trace[_rank<r>].json``.

        Named by the rows' config hash: benchopt's own per-run folder is named after every
        parameter and outgrows file-name limits.
        """
        repetition = run_context_value(self, "repetition", 0)
        digest = self.run_provenance[column("config_hash")][:16]
        name = "torch_trace.json" if self.context.world_size == 1 else \
            f"torch_trace_rank{self.context.rank}.json"
        return self._artefacts() / "traces" / digest / f"rep_{repetition}" / name

    def _artefacts(self) -> Path:
        """The run's artefact folder: ``outputs/<result name>/`` under ``scalebench run``."""
        base = run_context_value(self, "run_output_base", None)
        return Path(base) if base is not None else Path.cwd() / "outputs"  # `benchopt test`
