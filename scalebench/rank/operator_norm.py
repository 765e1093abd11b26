"""||A||^2 of a problem's operator stack: Lanczos on A^T A with an error-bound stopping rule,
cached on disk per operator configuration.

Lanczos builds the tridiagonal matrix T_k of A^T A on the Krylov space of a start vector; the
largest eigenvalue theta of T_k is the estimate (a lower bound of ||A||^2). With
r = beta_k |s_k| (the residual of the Ritz pair) and the gap theta - theta_2 to the next Ritz
value, r^2 / gap estimates the distance to ||A||^2 (the Kato-Temple bound with the Ritz gap);
iterations stop once it is below ``TOLERANCE`` relative. From a random start this takes 5 or
6 applications of A^T A on CT where the power iteration took 7 to 9, with errors below 2e-5
(tests/test_tomography.py checks it against a converged power iteration). No
reorthogonalisation: three vectors of the image's size are held, and a ghost copy of a
converged eigenvalue cannot raise the estimate.

The start vector is seeded random, or, where the problem offers a start operator (CT: every
8th to 16th angle), that operator's leading vector by power iteration: a tenth of the cost per
iteration or less, after which Lanczos on the whole A^T A stops after 2 applications.

The cache entry's key is the problem's ``operator_key`` (the parameters that determine A),
the device type, dtype and torch thread count it was computed with (CPU sums may round
differently with another count), and a digest of the source files of every
operator class in the stack (the code version): editing a projector invalidates its norms.
Entries are JSON files under ``cache_root()/operator_norms``, written atomically; an entry
that does not parse, belongs to another key or holds no positive finite number is recomputed
and rewritten, never trusted. A run names the entry it used under its config's torch-free key
(scalebench.data.norm_lookup), which predictions read.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from provenance.files import write_text_atomically
from scalebench.data.norm_lookup import norms_folder, note_entry
from scalebench.rank.settings import process_settings

MAX_ITERATIONS = 30  # never more than the fixed count used before the tolerance
TOLERANCE = 1e-4  # bound on the relative error of the estimate
START_TOLERANCE = 1e-3  # relative change that ends the start operator's power iteration
METHOD = "lanczos"


@dataclass(frozen=True)
class NormEstimate:
    """||A||^2, how it was obtained ('cache', 'computed', or 'probe': the process settings'
    ``norm_applications`` at most, not cached), iterations run, seconds spent."""

    value: float
    source: str
    iterations: int  # applications of A^T A
    seconds: float  # the whole estimate, the start's included
    start_iterations: int = 0  # applications of the start operator's A^T A (warm_start)
    start_seconds: float = 0.0  # of ``seconds``, the start vector's (warm_start)


def seeded_start(problem, seed: int) -> torch.Tensor:
    """A random start, drawn on the CPU so that every device and rank starts from it."""
    x_true = problem.x_true
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(x_true.shape, generator=generator, dtype=x_true.dtype).to(x_true.device)


def normal_operator(physics):
    """x -> A^T A x; identical on every rank of a split stack (its sums are all-reduced), so
    every rank takes the same decisions from it."""
    return lambda x: physics.A_adjoint(physics.A(x))


def power_iterate(apply, x: torch.Tensor, max_iterations: int,
                  tolerance: float) -> tuple[torch.Tensor, float, int]:
    """(last A^T A x, ||A^T A x|| of a unit x, iterations) of power iteration from ``x``,
    stopped once that norm changes by less than ``tolerance`` (relative)."""
    norm, previous, iterations = 0.0, -1.0, 0
    with torch.no_grad():
        while iterations < max_iterations and abs(norm - previous) > tolerance * norm:
            x = apply(x / torch.linalg.vector_norm(x))
            previous, norm = norm, torch.linalg.vector_norm(x).item()
            iterations += 1
    return x, norm, iterations


def warm_start(problem, seed: int, max_iterations: int = MAX_ITERATIONS
               ) -> tuple[torch.Tensor, int]:
    """(start vector, applications of the start operator): the leading vector of
    ``problem.norm_start``'s A^T A by power iteration from ``seeded_start``, to
    ``START_TOLERANCE`` or ``max_iterations``; ``seeded_start`` itself when the problem has
    no start operator."""
    x = seeded_start(problem, seed)
    start = getattr(problem, "norm_start", None)
    if start is None:
        return x, 0
    x, _, iterations = power_iterate(normal_operator(start), x, max_iterations,
                                     START_TOLERANCE)
    return x, iterations


def start_key(problem) -> str | dict:
    """What determines the start vector, for the cache key."""
    start = getattr(problem, "norm_start", None)
    if start is None:
        return "random"
    return {"operator": code_digest(start), "tolerance": START_TOLERANCE}


def lanczos(problem, max_iterations: int = MAX_ITERATIONS, tolerance: float = TOLERANCE,
            seed: int = 0, start_iterations: int = MAX_ITERATIONS) -> tuple[float, int, int]:
    """(||A||^2, applications of A^T A, of the start operator's) by Lanczos from
    ``warm_start`` (module docstring; at most ``start_iterations`` of the start operator)."""
    estimate = timed_lanczos(problem, max_iterations, tolerance, seed, start_iterations,
                             "computed", time.perf_counter())
    return estimate.value, estimate.iterations, estimate.start_iterations


def lanczos_from(problem, q: torch.Tensor, max_iterations: int = MAX_ITERATIONS,
                 tolerance: float = TOLERANCE) -> tuple[float, int]:
    """(||A||^2, applications of A^T A) by Lanczos from the start vector ``q`` (consumed)."""
    apply = normal_operator(problem.physics)
    q /= torch.linalg.vector_norm(q)
    previous = torch.zeros_like(q)
    alphas: list[float] = []
    betas: list[float] = []
    estimate, beta = 0.0, 0.0
    with torch.no_grad():
        for step in range(1, max_iterations + 1):
            w = apply(q)
            alpha = float(torch.vdot(q.flatten(), w.flatten()))
            w.sub_(q, alpha=alpha).sub_(previous, alpha=beta)
            beta = float(torch.linalg.vector_norm(w))
            alphas.append(alpha)
            ritz, vectors = np.linalg.eigh(np.diag(alphas) + np.diag(betas, 1)
                                           + np.diag(betas, -1))
            estimate = float(ritz[-1])
            residual = beta * abs(vectors[-1, -1])
            if beta <= 1e-12 * abs(estimate):
                break  # the Krylov space is invariant: the estimate is exact
            if step > 1 and residual**2 <= tolerance * estimate * (ritz[-1] - ritz[-2]):
                break
            betas.append(beta)
            previous, q = q, w.div_(beta)
    return estimate, step


def power_iteration(problem, max_iterations: int = 1000, tolerance: float = 1e-9,
                    seed: int = 0) -> tuple[float, int]:
    """(||A||^2, iterations) by power iteration on A^T A from ``seeded_start``, stopped once
    the estimate changes by less than ``tolerance`` (relative): the reference that tests and
    tools/ check ``lanczos`` against."""
    _, norm, iterations = power_iterate(normal_operator(problem.physics),
                                        seeded_start(problem, seed), max_iterations, tolerance)
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

    ``method`` (the estimator and its settings) is part of the key: a norm is reused only by runs
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
    return norms_folder() / f"{name}.json", key


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
    write_text_atomically(path, json.dumps(entry, sort_keys=True))


def estimate_operator_norm(problem, max_iterations: int = MAX_ITERATIONS,
                          tolerance: float = TOLERANCE, seed: int = 0,
                          run_key: dict | None = None) -> NormEstimate:
    """||A||^2 of ``problem.physics``: from the cache when a valid entry exists, else computed
    (and cached when the problem has an ``operator_key`` and holds every operator).
    ``run_key``: what the run's config says of it (data.norm_lookup.run_key), noted with the
    entry read or written so that a prediction knows the norm is cached.

    Under a memory probe's settings (``norm_applications``), at most that many applications
    of A^T A, and of the start operator's, neither cache read nor written. Each Lanczos step
    holds the same three image-sized vectors and each power step the same two, so the set-up
    reaches its peak within two applications of each; the probe uses the estimate only for
    the step size of its iterations, whose memory does not depend on it. A cached norm would
    skip the applications and their memory: the probe always computes."""
    start = time.perf_counter()
    cap = process_settings().norm_applications
    if cap is not None:
        return timed_lanczos(problem, min(max_iterations, cap), tolerance, seed, cap, "probe",
                             start)
    entry = cache_entry(problem, {"name": METHOD, "max_iterations": max_iterations,
                                  "tolerance": tolerance, "seed": seed,
                                  "start": start_key(problem)})
    if entry is not None:
        value = read_cached(*entry)
        if value is not None:
            if run_key is not None:
                note_entry(run_key, entry[0])
            return NormEstimate(value, "cache", 0, time.perf_counter() - start)
    estimate = timed_lanczos(problem, max_iterations, tolerance, seed, MAX_ITERATIONS,
                             "computed", start)
    if entry is not None:
        path, key = entry
        write_atomically(path, {"key": key, "norm_squared": estimate.value,
                                "iterations": estimate.iterations,
                                "start_iterations": estimate.start_iterations,
                                "seconds": estimate.seconds})
        if run_key is not None:
            note_entry(run_key, path)
    return estimate


def timed_lanczos(problem, max_iterations: int, tolerance: float, seed: int,
                  start_iterations: int, source: str, started: float) -> NormEstimate:
    """``lanczos`` as a ``NormEstimate`` whose seconds count from ``started`` (perf_counter),
    the start vector's apart: a capacity probe scales the whole operator's applications
    only (time_model.norm_seconds)."""
    warming = time.perf_counter()
    q, start_count = warm_start(problem, seed, start_iterations)
    warmed = time.perf_counter()
    value, iterations = lanczos_from(problem, q, max_iterations, tolerance)
    # Without a start operator, the random start's draw counts with the rest.
    return NormEstimate(value, source, iterations, time.perf_counter() - started, start_count,
                        warmed - warming if start_count else 0.0)
