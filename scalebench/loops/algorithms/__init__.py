"""The ``pnp`` solver's algorithms, one module each (``spec``: what an algorithm is); adding
one is a module and an entry here."""

from __future__ import annotations

from scalebench.loops.algorithms import admm, dpir, drs, fista, hqs, pgd, red
from scalebench.loops.algorithms.spec import AlgorithmSpec

ALGORITHMS: dict[str, AlgorithmSpec] = {
    spec.name: spec for spec in (pgd.SPEC, fista.SPEC, hqs.SPEC, admm.SPEC, drs.SPEC,
                                dpir.SPEC, red.SPEC)
}

__all__ = ["ALGORITHMS", "AlgorithmSpec"]
