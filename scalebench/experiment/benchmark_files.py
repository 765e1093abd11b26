"""The solvers, datasets and denoisers a benchmark folder offers: the registries'
(scalebench.loops.SOLVERS, scalebench.problems.PROBLEMS, scalebench.denoisers.catalog.DENOISERS)
and those of its ``solvers/*.py``, ``datasets/*.py`` and ``denoisers/*.py`` files that the
registries lack, read from the files themselves, so that a file benchopt runs is one
``scalebench run`` validates and runs too.

A registered entry is read without importing anything heavy; an unregistered solver or
dataset file is imported (it imports the numerical stack): its ``Solver`` class must carry
the ``param_specs`` its own validation uses (scalebench.benchopt_glue.base.LoopSolver), its
``Dataset`` class a ``problems`` registry holding its spec (ProblemDataset). A denoiser file
holds a ``SPEC`` (scalebench.denoisers.spec.DenoiserSpec); it joins ``DENOISERS`` itself,
since the ``denoiser`` parameter's choices, the tiling, the capacity model and the builders
all read that registry, in the process that checks a config and in every benchopt process
(the benchmark's objective registers its folder's files)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

from scalebench.denoisers.catalog import register
from scalebench.denoisers.spec import DenoiserSpec
from scalebench.errors import ConfigError
from scalebench.loops.spec import SolverSpec
from scalebench.param_spec import Param
from scalebench.problems.spec import ProblemSpec


def declared_name(path: Path, kind: str = "Solver") -> str | None:
    """The ``name`` a file's ``kind`` class (Solver, Dataset) declares (benchopt's name); the
    file's stem when the class sets none; None for a file without such a class."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError, UnicodeDecodeError) as error:
        raise ConfigError(f"{kind.lower()} file {path} cannot be read: "
                          f"{type(error).__name__}: {error}") from None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == kind:
            for item in node.body:
                if isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant) \
                        and any(isinstance(t, ast.Name) and t.id == "name"
                                for t in item.targets) and isinstance(item.value.value, str):
                    return item.value.value
            return path.stem
    return None


def _module(path: Path, what: str):
    """A benchmark file imported as benchopt imports it (its folder importable); ``what``
    (solver, dataset, denoiser) names it in the error."""
    module_name = f"_scalebench_{what}_file_{path.parent.parent.name}_{path.stem}"
    sys.path.insert(0, str(path.parent.parent))
    try:
        loader = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - any failure of a user's file is its error
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ConfigError(f"{what} file {path} cannot be imported: "
                          f"{type(error).__name__}: {first}") from None
    finally:
        sys.path.remove(str(path.parent.parent))
    return module


def imported_class(path: Path, kind: str) -> type:
    """The ``kind`` class (Solver, Dataset, Objective) of a benchmark file, imported as
    benchopt imports it: the one loader of benchmark files (the config check, the capacity
    probes)."""
    return getattr(_module(path, kind.lower()), kind)


def file_spec(path: Path, name: str) -> SolverSpec:
    """The spec of an unregistered solver file: its class's ``spec`` renamed (a subclass of
    a registered solver) with its own ``param_specs``, or a spec of those specs alone."""
    cls = imported_class(path, "Solver")
    params = getattr(cls, "param_specs", None)
    if not params or not all(isinstance(p, Param) for p in params.values()):
        raise ConfigError(f"solver '{name}' ({path}): class Solver has no param_specs (a dict "
                          f"of scalebench.param_spec.Param); scalebench validates a solver from "
                          f"them: subclass a scalebench solver class")
    spec = getattr(cls, "spec", None)
    if isinstance(spec, SolverSpec):
        return replace(spec, name=name, params=params)
    doc = (cls.__doc__ or "").strip()
    return SolverSpec(name, doc.splitlines()[0] if doc else "", params, uses_operator=True,
                      uses_denoiser="denoiser" in params)


def benchmark_solvers(folder: Path | None,
                      registry: dict[str, SolverSpec]) -> dict[str, SolverSpec]:
    """``registry`` and the solvers of ``folder``'s files it lacks (folder None: the
    registry alone)."""
    solvers = dict(registry)
    if folder is None or not (folder / "solvers").is_dir():
        return solvers
    for path in sorted((folder / "solvers").glob("*.py")):
        name = declared_name(path)
        if name is not None and name not in solvers:
            solvers[name] = file_spec(path, name)
    return solvers


def benchmark_problems(folder: Path | None,
                       registry: dict[str, ProblemSpec]) -> dict[str, ProblemSpec]:
    """``registry`` and the problems of ``folder``'s dataset files it lacks, each read from
    its ``Dataset`` class's ``problems`` registry (folder None: the registry alone)."""
    problems = dict(registry)
    if folder is None or not (folder / "datasets").is_dir():
        return problems
    for path in sorted((folder / "datasets").glob("*.py")):
        name = declared_name(path, "Dataset")
        if name is None or name in problems:
            continue
        spec = getattr(imported_class(path, "Dataset"), "problems", {}).get(name)
        if not isinstance(spec, ProblemSpec):
            raise ConfigError(f"dataset '{name}' ({path}): class Dataset has no problems "
                              f"registry holding a ProblemSpec named '{name}' (subclass "
                              f"scalebench.benchopt_glue.base.ProblemDataset and set problems)")
        problems[name] = spec
    return problems


def register_benchmark_denoisers(folder: Path | None) -> list[str]:
    """Adds the ``SPEC`` of each of ``folder``'s ``denoisers/*.py`` files to ``DENOISERS``
    (scalebench.denoisers.catalog.register); the names added. A file without a
    DenoiserSpec, or one naming a denoiser scalebench or another file already defines, is
    refused (ConfigError)."""
    if folder is None or not (folder / "denoisers").is_dir():
        return []
    names = []
    for path in sorted((folder / "denoisers").glob("*.py")):
        spec = getattr(_module(path, "denoiser"), "SPEC", None)
        if not isinstance(spec, DenoiserSpec):
            raise ConfigError(f"denoiser file {path} has no SPEC (a "
                              f"scalebench.denoisers.spec.DenoiserSpec)")
        register(spec, path)
        names.append(spec.name)
    return names

