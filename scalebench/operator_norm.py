"""||A||^2 of a problem's operator stack: power iteration with a stopping tolerance, cached
on disk per operator configuration.

The cache entry's key is the problem's ``operator_key`` (the parameters that determine A),
the device type, dtype and torch thread count it was computed with (CPU sums may round
differently with another count), and a digest of the source files of every
operator class in the stack (the code version): editing a projector invalidates its norms.
Entries are JSON files under ``cache_root()/operator_norms``, written atomically; an entry
that does not parse, belongs to another key or holds no positive finite number is recomputed
and rewritten, never trusted.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from provenance.results import atomic_path
from scalebench.cache import cache_root

MAX_ITERATIONS = 30  # never more than the fixed count used before the tolerance
TOLERANCE = 1e-4  # relative change of the estimate between two power iterations


@dataclass(frozen=True)
class NormEstimate:
    """||A||^2, how it was obtained ('cache' or 'computed'), iterations run, seconds spent."""

    value: float
    source: str
    iterations: int
    seconds: float


def power_iteration(problem, max_iterations: int = MAX_ITERATIONS,
                    tolerance: float = TOLERANCE, seed: int = 0) -> tuple[float, int]:
    """(||A||^2, iterations) by power iteration on A^T A from a seeded random start.

    Stops once the estimate changes by less than ``tolerance`` (relative) between two
    iterations. The estimate is computed from A^T A x, identical on every rank of a split
    stack, so every rank stops at the same iteration.
    """
    x_true = problem.x_true
    generator = torch.Generator().manual_seed(seed)  # CPU: the same start on every device
    x = torch.randn(x_true.shape, generator=generator, dtype=x_true.dtype).to(x_true.device)
    norm, previous, iterations = 0.0, -1.0, 0
    with torch.no_grad():
        while iterations < max_iterations and abs(norm - previous) > tolerance * norm:
            x = x / torch.linalg.vector_norm(x)
            x = problem.physics.A_adjoint(problem.physics.A(x))
            previous, norm = norm, torch.linalg.vector_norm(x).item()
            iterations += 1
    return norm, iterations


def code_digest(physics) -> str:
    """SHA-256 over the module names and source files of the operator classes in ``physics``
    (a stack); not over paths, so that another checkout or a container shares the cache."""
    operators = getattr(physics, "physics_list", None) or getattr(physics, "operators", [physics])
    classes = {f"{type(op).__module__}.{type(op).__qualname__}": type(op) for op in operators}
    digest = hashlib.sha256()
    for name in sorted(classes):
        digest.update(name.encode())
        source = inspect.getsourcefile(classes[name])
        if source and Path(source).is_file():
            digest.update(Path(source).read_bytes())
    return digest.hexdigest()


def cache_entry(problem, method: dict) -> tuple[Path, dict] | None:
    """(file, key) of the problem's cached norm, or None when it is not cacheable.

    ``method`` (power-iteration settings) is part of the key: a norm is reused only by runs
    that would have computed the same number.
    """
    key_params = getattr(problem, "operator_key", None)
    if not key_params or len(problem.operator_indices) != problem.num_operators:
        return None  # no key, or only this rank's share of the stack
    # The stack's class too: a rank stack sums A_k^T y_k in float64, a plain one in float32.
    key = {"operator": key_params, "stack": type(problem.physics).__qualname__,
           "code": code_digest(problem.physics),
           "device": problem.x_true.device.type, "dtype": str(problem.x_true.dtype),
           "threads": torch.get_num_threads(), "method": method}
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return cache_root() / "operator_norms" / f"{name}.json", key


def read_cached(path: Path, key: dict) -> float | None:
    """The cached ||A||^2 at ``path`` if it is a valid entry for ``key``, else None."""
    try:
        entry = json.loads(path.read_text())
        value = float(entry["norm_squared"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if entry.get("key") != key or not math.isfinite(value) or value <= 0:
        return None
    return value


def write_atomically(path: Path, entry: dict) -> None:
    """Write ``entry`` as JSON to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary:
        temporary.write_text(json.dumps(entry, sort_keys=True))


def operator_norm_squared(problem, max_iterations: int = MAX_ITERATIONS,
                          tolerance: float = TOLERANCE, seed: int = 0) -> NormEstimate:
    """||A||^2 of ``problem.physics``: from the cache when a valid entry exists, else computed
    (and cached when the problem has an ``operator_key`` and holds every operator)."""
    start = time.perf_counter()
    entry = cache_entry(problem, {"max_iterations": max_iterations, "tolerance": tolerance,
                                  "seed": seed})
    if entry is not None:
        value = read_cached(*entry)
        if value is not None:
            return NormEstimate(value, "cache", 0, time.perf_counter() - start)
    value, iterations = power_iteration(problem, max_iterations, tolerance, seed)
    seconds = time.perf_counter() - start
    if entry is not None:
        path, key = entry
        write_atomically(path, {"key": key, "norm_squared": value, "iterations": iterations,
                                "seconds": seconds})
    return NormEstimate(value, "computed", iterations, seconds)
