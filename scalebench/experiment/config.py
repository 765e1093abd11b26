"""Configs (experiment files): loading and whole-grid validation before anything runs.

A config is one YAML file in benchopt's config format: ``objective``, ``dataset`` and
``solver`` lists (a missing one means all; names match regardless of case) whose entries are
a bare name, ``name[parameter=value,...]`` or ``name: {parameter: value-or-list}``, plus run
options (the entries are parsed by scalebench.experiment.grid; the objective's benchmark,
scalebench.benchmarks, says which datasets and solvers it may name and how a pair is
checked). Every combination of the grid is checked (names, types, ranges, whether the
denoiser can take the image, whether the weights exist, whether ``max-runs`` lets every
iteration be recorded), so a mistake is reported in one line before any job starts. Whether
the machine has the device a run asks for is not part of it (a login node without a GPU
validates a ``device: cuda`` config): ``check_devices_available`` is checked where the ranks
run, by ``scalebench run`` before it starts them and again by every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalebench.benchmarks import BENCHMARKS, INFERENCE, BenchmarkSpec
from scalebench.durations import DURATION_FORMS, duration_seconds
from scalebench.errors import ConfigError, ScalebenchError
from scalebench.experiment.benchmark_files import (
    benchmark_problems,
    benchmark_solvers,
    register_benchmark_denoisers,
)
from scalebench.experiment.grid import Component, section, solver_section
from scalebench.experiment.reading import read_yaml
from scalebench.experiment.scalebench_keys import SCALEBENCH_KEYS, check_scalebench_keys
from scalebench.launch.resources import requested_ranks
from scalebench.loops.spec import SolverSpec
from scalebench.param_spec import (
    Param,
    check_value,
    renamed_parameters,
    resolved_parameters,
    validate_parameters,
)
from scalebench.problems.spec import ProblemSpec


@dataclass(frozen=True)
class DurationParam(Param):
    """A run option that is a duration: read by scalebench.durations, held in seconds."""

    def describe(self) -> str:
        return DURATION_FORMS + " (bare: seconds)"


BENCHOPT_DEFAULT_MAX_RUNS = 100
RUN_OPTIONS = {
    "n-repetitions": Param(1, int, minimum=1, doc="repetitions of every run"),
    "max-runs": Param(BENCHOPT_DEFAULT_MAX_RUNS, int, minimum=1,
                      doc="evaluations recorded per run; must exceed max_iter"),
    # benchopt's default; expand hands benchopt the seconds, never the text
    "timeout": DurationParam(100, float, doc="how long one run of a solver may take"),
}
# Further `benchopt run` options a config may hold: handed to benchopt unchanged, where the
# launcher's own command-line options (--no-plot, --no-display, --no-cache, --output) win.
PASSED_OPTIONS = ("plot", "display", "html", "no-cache", "output", "n-jobs", "profile",
                  "seed", "no-timeout", "force-solver")
# Options that would change how benchopt itself is launched, which scalebench does instead.
LAUNCH_OPTIONS = {
    "collect": "only collects cached results, and scalebench runs never use benchopt's cache",
    "pdb": "opens an interactive debugger inside the ranks; use `benchopt run --pdb` directly",
    "parallel-config": "hands runs to benchopt's parallel backend; scalebench launches the "
                       "ranks itself (use `benchopt run --parallel-config` directly)",
    "env": "selects a conda environment; run scalebench inside that environment instead",
    "env-name": "selects a conda environment; run scalebench inside that environment instead",
}


@dataclass
class Config:
    """A config (experiment file) as read and validated: its grid of datasets and solvers, and
    its run options; each of its combinations is one experiment (scalebench.experiment.expand)."""

    path: Path
    datasets: list[Component]
    solvers: list[Component]
    options: dict[str, Any]  # the run options given, checked (a timeout in seconds)
    # (solver, dataset) pairs not run: a baseline listed beside datasets it does not apply to
    # runs on those it applies to (fbp on tomography_2d, not on the other datasets listed).
    skipped: frozenset[tuple[str, str]] = frozenset()
    raw: dict[str, Any] = field(default_factory=dict)  # the file's mapping as read
    benchmark: BenchmarkSpec = INFERENCE  # the rules of its objective
    folder: Path | None = None  # the benchmark folder its solvers and datasets come from
    # Its scalebench keys (scalebench.experiment.scalebench_keys), checked or defaults.
    scalebench: dict[str, Any] = field(default_factory=dict)

    def runs(self, solver: str, dataset: str) -> bool:
        """Whether the pair is one of the config's experiments."""
        return (solver, dataset) not in self.skipped

    def option(self, key: str) -> Any:
        """The run option ``key``: as given, else its default."""
        return self.options.get(key, RUN_OPTIONS[key].default)


def _check_components(components: list[Component], registry: dict[str, dict[str, Param]],
                      kind: str, errors: list[str],
                      renames: dict[str, dict[str, str]]) -> list[Component]:
    """The components whose names and parameters are valid (old parameter names given their
    new ones: ``renames`` by component, old -> new); a line in ``errors`` for each
    mistake of the others."""
    valid = []
    for component in components:
        # benchopt matches names regardless of case: so does scalebench.
        known = {name.lower(): name for name in registry}
        if component.name.lower() not in known:
            errors.append(f"unknown {kind} '{component.name}' "
                            f"(allowed: {', '.join(sorted(registry))})")
            continue
        component.name = known[component.name.lower()]
        owner = f"{kind} '{component.name}'"
        try:
            component.grid = renamed_parameters(owner, component.grid,
                                                renames.get(component.name, {}))
        except ConfigError as error:
            errors.append(str(error))
            continue
        empty = [key for key, values in component.grid.items() if not values]
        for key in empty:
            errors.append(f"{owner}: parameter '{key}' has an empty list of values "
                            f"(give one value or a non-empty list)")
        if empty:
            continue
        found = len(errors)
        try:
            combinations = component.combinations()
        except ConfigError as error:
            errors.append(str(error))
            continue
        for combination in combinations:
            try:
                validate_parameters(owner, combination, registry[component.name])
            except ConfigError as error:
                errors.append(str(error))
        if len(errors) == found:
            valid.append(component)
    return valid


def _check_options(raw: dict, errors: list[str]) -> dict[str, Any]:
    options = {}
    for key, spec in RUN_OPTIONS.items():
        if key not in raw:
            continue
        try:
            options[key] = duration_seconds(raw[key], f"run option '{key}'") \
                if isinstance(spec, DurationParam) else \
                check_value("run options", key, raw[key], spec)
        except ConfigError as error:
            errors.append(str(error))
    return options


def _skipped_pairs(datasets: list[Component], solvers: list[Component],
                   specs: dict[str, SolverSpec]) -> frozenset[tuple[str, str]]:
    """The pairs of a solver and a listed dataset it does not apply to, where it applies to
    another listed dataset (those it applies to none of are refused by the pair checks)."""
    skipped = set()
    for solver in solvers:
        spec = specs.get(solver.name)
        if spec is None:
            continue
        names = [dataset.name for dataset in datasets]
        if any(spec.applies_to(name) for name in names):
            skipped.update((solver.name, name) for name in names if not spec.applies_to(name))
    return frozenset(skipped)


def _check_pairs(config: Config, world_size: int, rules: BenchmarkSpec,
                 datasets: dict[str, ProblemSpec], solvers: dict[str, SolverSpec],
                 errors: list[str]) -> None:
    """Checks that need a dataset and a solver together (and the number of ranks)."""
    max_runs = config.options.get("max-runs", BENCHOPT_DEFAULT_MAX_RUNS)
    for dataset in config.datasets:
        spec = datasets[dataset.name]
        for dataset_values in dataset.combinations():
            values = resolved_parameters(dataset_values, spec.params)
            try:
                shape = spec.image_shape(**values)
            except ValueError as error:
                errors.append(f"dataset '{dataset.name}': {error}")
                continue
            for solver in config.solvers:
                if not config.runs(solver.name, dataset.name):
                    continue
                for solver_values in solver.combinations():
                    solver_spec = solvers[solver.name]
                    params = resolved_parameters(solver_values, solver_spec.params)
                    where = f"solver '{solver.name}' on dataset '{dataset.name}'"
                    try:
                        rules.check_pair(solver_spec, spec, values, shape, params,
                                         requested_ranks(params, world_size))
                    except ScalebenchError as error:
                        errors.append(f"{where}: {error}")
                    rows = rules.rows(params)
                    if rows > max_runs:
                        given = " with ".join(f"{name}={params[name]}"
                                              for name in rules.row_params)
                        errors.append(f"{where}: {given} records {rows} rows but "
                                        f"max-runs is {max_runs} (set max-runs >= {rows})")


def _validation_images(datasets: list[Component],
                       specs: dict[str, ProblemSpec]) -> list[str]:
    """A tuned config scores its methods on test images: a validation image it names (its
    settings were chosen on those) is refused, one line each."""
    errors = []
    for dataset in datasets:
        family = specs[dataset.name].images
        if family is None:
            continue
        for values in dataset.combinations():
            name = family.name_of(resolved_parameters(values, specs[dataset.name].params))
            if name is not None and family.split_of(name) == "validation":
                errors.append(f"dataset '{dataset.name}': image {name!r} is a validation "
                              f"image, and this config's settings were tuned on the "
                              f"validation images (key 'tuned'); score on the test images "
                              f"({', '.join(family.split('test'))})")
    return errors


def check_devices_available(config: Config) -> None:
    """Raise ConfigError when a solver asks for a device this machine does not have (only
    'cuda' can be missing: torch is loaded only to look for one)."""
    for solver in config.solvers:
        for solver_values in solver.combinations():
            if solver_values.get("device", "auto") != "cuda":
                continue
            from scalebench.rank.context import resolve_device

            try:
                resolve_device("cuda")
            except ScalebenchError as error:
                raise ConfigError(f"solver '{solver.name}': {error}") from None


def load_config(path: str | Path, world_size: int = 1, benchmark: Path | None = None) -> Config:
    """Read (once) and validate an experiment file for ``world_size`` ranks (per run, unless
    its solver sets slurm_nodes / slurm_ntasks_per_node); raise ConfigError naming every
    error, one line each (a file that cannot be read or parsed: that alone). Its solvers and
    datasets are those of the ``benchmark`` folder (None: the repository's folder for its
    objective): the registries' and its unregistered files'. The Config carries what was
    read, so nothing after it reads the file again."""
    return check_config(read_config(path), path, world_size, benchmark)


def read_config(path: str | Path) -> dict[str, Any]:
    """The mapping of the experiment file ``path`` (a ConfigError when it is not one)."""
    raw = read_yaml(Path(path), "config")
    if not isinstance(raw, dict):
        raise ConfigError(f"config {path} must be a mapping of keys, got {type(raw).__name__}")
    return raw


def check_config(raw: dict[str, Any], path: str | Path, world_size: int = 1,
                 benchmark: Path | None = None) -> Config:
    """``load_config`` of the mapping ``raw`` already read from ``path``."""
    path = Path(path)
    errors: list[str] = []
    allowed = {"objective", "dataset", "solver", *RUN_OPTIONS, *PASSED_OPTIONS,
               *SCALEBENCH_KEYS}
    for key in sorted(set(raw) - allowed - set(LAUNCH_OPTIONS)):
        errors.append(f"unknown config key '{key}' (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(set(raw) & set(LAUNCH_OPTIONS)):
        errors.append(f"config key '{key}' {LAUNCH_OPTIONS[key]}")
    known = {name.lower(): name for name in BENCHMARKS}
    # An unknown objective is reported and the rest is checked against the default one.
    objective_name = INFERENCE.objective
    try:
        objectives = section(raw, "objective", [INFERENCE.objective])
    except ConfigError as error:
        errors.append(str(error))
        objectives = []
    for objective in objectives:
        if objective.name.lower() not in known or objective.grid or len(objectives) > 1:
            names = " or ".join(f"'{name}'" for name in sorted(BENCHMARKS))
            errors.append(f"objective must be {names} (one, without parameters), got "
                            f"'{objective.name}'")
            break
        objective_name = known[objective.name.lower()]
    rules = BENCHMARKS[objective_name]
    folder = benchmark or rules.path
    try:
        register_benchmark_denoisers(folder)
        specs = benchmark_solvers(folder, rules.solvers)
        datasets_specs = benchmark_problems(folder, rules.problems)
    except ConfigError as error:
        errors.append(str(error))
        specs, datasets_specs = dict(rules.solvers), dict(rules.problems)
    datasets = _listed(errors, lambda: section(raw, "dataset", sorted(datasets_specs)))
    # no solver section: every solver that applies to every listed dataset
    applying = [name for name in sorted(specs)
                if all(specs[name].applies_to(dataset.name) for dataset in datasets)]
    solvers = _listed(errors, lambda: solver_section(raw, applying))
    options = _check_options(raw, errors)
    scalebench = check_scalebench_keys(raw, errors)
    datasets_ok = _check_components(datasets, {k: v.params for k, v in datasets_specs.items()},
                                    "dataset", errors,
                                    {k: v.renamed for k, v in datasets_specs.items()})
    solvers_ok = _check_components(solvers, {k: v.params for k, v in specs.items()}, "solver",
                                   errors, {k: v.renamed for k, v in specs.items()})
    if scalebench.get("tuned"):
        errors.extend(_validation_images(datasets_ok, datasets_specs))
    skipped = _skipped_pairs(datasets, solvers, specs)
    config = Config(path, datasets, solvers, options, skipped, raw, rules, folder, scalebench)
    # Pairs of the valid datasets and solvers (the others have been reported already).
    _check_pairs(Config(path, datasets_ok, solvers_ok, options, skipped), world_size, rules,
                 datasets_specs, specs, errors)
    if errors:
        raise ConfigError("\n".join(dict.fromkeys(errors)))  # each once, in order
    return config


def _listed(errors: list[str], read: Callable[[], list[Component]]) -> list[Component]:
    """The components ``read`` returns; none (and a line in ``errors``) when it fails."""
    try:
        return read()
    except ConfigError as error:
        errors.append(str(error))
        return []
