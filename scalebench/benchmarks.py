"""The repository's benchopt benchmarks, one record each: its folder, the objective configs
name it by, the problems and solvers its configs may name, and the rules of a dataset and a
solver together. Config validation, plan, replay and the report read these records.

Imports no torch: the registries it holds are specs (``scalebench.problems``,
``scalebench.loops``), and the checks of a config read them before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalebench.denoisers.catalog import resolve_weights
from scalebench.denoisers.tiles import check_denoiser_fits
from scalebench.errors import ScalebenchError
from scalebench.loops import SOLVERS
from scalebench.loops.inference_parameters import check_distribution, evaluations
from scalebench.loops.spec import SolverSpec
from scalebench.loops.training.parameters import UNROLLED_PGD, check_training, training_rows
from scalebench.problems import PROBLEMS, setup_problem
from scalebench.problems.spec import ProblemSpec
from scalebench.problems.training import VOLUME_SPEC
from scalebench.repository import REPO

if TYPE_CHECKING:
    from scalebench.problems.base import ProblemSetup

# (solver, problem, the problem's resolved parameters, image shape (C, *spatial), the solver's
# resolved parameters, ranks) -> None, or ScalebenchError naming what does not fit.
PairCheck = Callable[[SolverSpec, ProblemSpec, dict, tuple[int, ...], dict, int], None]


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchopt benchmark of the repository and what its configs may name."""

    folder: str  # the folder's name under the repository root
    objective: str  # the objective's name, as configs and rows spell it
    problems: dict[str, ProblemSpec]  # its datasets; a folder's own files may add more
    solvers: dict[str, SolverSpec]  # its solvers; a folder's own files may add more
    check_pair: PairCheck
    rows: Callable[[dict], int]  # rows one run records, for its solver parameters
    row_params: tuple[str, ...]  # the solver parameters ``rows`` depends on

    @property
    def path(self) -> Path:
        return REPO / self.folder

    def setup_problem(self, name: str, **params) -> ProblemSetup:
        """Validate ``params`` and set up the benchmark's problem ``name``."""
        return setup_problem(name, problems=self.problems, **params)


def _inference_pair(solver: SolverSpec, spec: ProblemSpec, values: dict,
                    shape: tuple[int, ...], params: dict, ranks: int) -> None:
    """Checks of a dataset and an inference solver together (and the number of ranks)."""
    solver.check_applies(spec.name)
    if solver.uses_denoiser:
        check_denoiser_fits(params, shape)
    check_distribution(params, shape, spec.num_operators(**values), ranks)
    if solver.uses_denoiser:
        resolve_weights(params["denoiser"], shape[0], params["pretrained"])
    solver.check_problem(spec, values, shape, params)


def _training_pair(solver: SolverSpec, spec: ProblemSpec, values: dict,
                   shape: tuple[int, ...], params: dict, ranks: int) -> None:
    """Checks of a dataset and a training solver together (and the number of ranks)."""
    check_training(params, spec, values, ranks)


INFERENCE = BenchmarkSpec("benchmark_inference", "imaging_inverse_problem", PROBLEMS, SOLVERS,
                          _inference_pair, evaluations, ("max_iter", "eval_every"))
# Training draws images from an image_size of the generated ground truths; the problems and
# solvers its folder has a file for (a config naming another one is refused when validated).
TRAINING = BenchmarkSpec(
    "benchmark_training", "supervised_training",
    {**{name: PROBLEMS[name] for name in ("synthetic", "tomography_2d", "multiframe_superres")},
     VOLUME_SPEC.name: VOLUME_SPEC},
    {UNROLLED_PGD.name: UNROLLED_PGD}, _training_pair, training_rows, ("max_iter",))
# By objective name: the objective a config names selects its benchmark.
BENCHMARKS: dict[str, BenchmarkSpec] = {spec.objective: spec for spec in (INFERENCE, TRAINING)}


def benchmark_in_folder(name: str) -> BenchmarkSpec | None:
    """The repository benchmark whose folder is called ``name``; None for another folder."""
    return next((spec for spec in BENCHMARKS.values() if spec.folder == name), None)


def registered_problems() -> dict[str, ProblemSpec]:
    """Every problem of the repository's benchmarks, by name."""
    return {name: spec for benchmark in BENCHMARKS.values()
            for name, spec in benchmark.problems.items()}


def registered_solvers() -> dict[str, SolverSpec]:
    """Every solver of the repository's benchmarks, by name."""
    return {name: spec for benchmark in BENCHMARKS.values()
            for name, spec in benchmark.solvers.items()}


def problem_spec(name: str) -> ProblemSpec | None:
    """The spec of dataset ``name`` (benchopt's name, any parameters) in any repository
    benchmark; None for a dataset of a folder's own files."""
    return registered_problems().get(str(name).split("[")[0])


def choose_benchmark(given: Path | None, named: str) -> Path:
    """The benchmark folder of a run: ``given`` (``--benchmark``), else the repository's folder
    ``named`` for the config's objective. A given folder that bears the name of the other
    repository benchmark is refused: its objective is not the one the config names."""
    if given is None:
        return REPO / (named or INFERENCE.folder)
    given = given.resolve()
    if named and benchmark_in_folder(given.name) and given.name != named:
        raise ScalebenchError(f"the config's objective is run by {named}, not by the "
                              f"--benchmark folder {given} (give {REPO / named} or leave "
                              f"--benchmark out; SLURM templates: SB_BENCHMARK)")
    return given


def config_benchmark(raw: Any) -> BenchmarkSpec:
    """The benchmark of the objective a parsed config names.

    A config without an objective, or naming an unknown one, gets the inference benchmark:
    its validation then says what is wrong. Names match regardless of case, as in benchopt.
    """
    entries = raw.get("objective", []) if isinstance(raw, dict) else []
    for entry in entries if isinstance(entries, list) else [entries]:
        name = next(iter(entry), "") if isinstance(entry, dict) else str(entry)
        name = name.split("[")[0].strip().lower()
        if name in BENCHMARKS:
            return BENCHMARKS[name]
    return INFERENCE
