"""The link between benchopt's classes and scalebench's components.

The benchmark folders stay thin: each Dataset or Solver names a scalebench spec and inherits
validation and the measured loop from here.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from pathlib import Path

from benchopt import BaseDataset, BaseSolver
from benchopt.stopping_criterion import StoppingCriterion

from scalebench.determinism import apply_determinism, set_threads
from scalebench.params import Param, resolved_parameters, validate_parameters
from scalebench.problems import PROBLEMS, Problem, build_problem
from scalebench.profiling import StepProfiler
from scalebench.solvers.common import check_denoiser_fits, make_denoiser, resolve_device
from scalebench.stamping import run_record


class ProblemDataset(BaseDataset):
    """A benchopt Dataset built by ``scalebench.problems.PROBLEMS[name]``."""

    def __init__(self, **parameters) -> None:
        validate_parameters(f"dataset '{self.name}'", parameters, PROBLEMS[self.name].params)
        super().__init__(**parameters)

    def get_data(self) -> dict:
        return dict(problem=build_problem(self.name, **self._parameters))


class LoopSolver(BaseSolver):
    """A benchopt Solver running a scalebench loop for ``max_iter`` iterations.

    Every iteration is evaluated (``get_next``); the loop's ``x`` and its profiler's latest
    per-step figures are the result handed to the objective.
    """

    sampling_strategy = "callback"
    # Never stop on a flat curve: the run length is the solver's own ``max_iter``.
    stopping_criterion = StoppingCriterion(strategy="callback")
    param_specs: dict[str, Param] = {}

    def __init__(self, **parameters) -> None:
        validate_parameters(f"solver '{self.name}'", parameters, self.param_specs)
        super().__init__(**parameters)

    @property
    def params(self) -> dict:
        return resolved_parameters(self._parameters, self.param_specs)

    def set_objective(self, problem: Problem) -> None:
        check_denoiser_fits(self.params, tuple(problem.x_true.shape[1:]))
        set_threads(self.params["num_threads"])
        apply_determinism(self.params["deterministic"], self.params["seed"])
        self.device = resolve_device(self.params["device"])
        self.problem = problem.to(self.device)
        self.denoiser = make_denoiser(self.params, problem.x_true.shape[1], self.device)

    @abstractmethod
    def make_loop(self, profiler: StepProfiler):
        """The loop object: has ``x`` and ``iterate()``, measured by ``profiler``."""

    def pre_run_hook(self, stop_val) -> None:
        # Set-up (operator norm, initial estimate) happens here, outside benchopt's clock:
        # the "time" column counts iterations only.
        mode = self.params["profiler"]
        trace = self._trace_path() if mode == "torch" else None
        self.profiler = StepProfiler(self.device, mode, trace)
        self.loop = self.make_loop(self.profiler)
        self.run_record = run_record(self.problem, self.name, self.params)

    def run(self, callback) -> None:
        with self.profiler:
            for _ in range(self.params["max_iter"]):
                if not callback():
                    return
                self.loop.iterate()
            callback()

    def get_next(self, stop_val: int) -> int:
        return stop_val + 1

    def get_result(self) -> dict:
        return dict(x_hat=self.loop.x, step_stats=dict(self.profiler.last),
                    run_record=self.run_record)

    def _trace_path(self) -> Path:
        try:
            folder = self.get_run_output_path()
        except (RuntimeError, AttributeError):  # no per-run folder (e.g. `benchopt test`)
            folder = Path.cwd() / "outputs" / "traces" / re.sub(r"[^\w.=-]+", "_", str(self))
        return folder / "torch_trace.json"
