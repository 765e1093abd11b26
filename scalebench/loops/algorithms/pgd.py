"""Proximal gradient: x <- beta D_sigma(x - gamma grad f(x)) + (1 - beta) x."""

from __future__ import annotations

from scalebench.loops.algorithms.spec import AlgorithmSpec


class ProximalGradient:
    def __init__(self, loop, x0) -> None:
        self.x = x0

    def step(self, loop, k: int):
        z = loop.denoise(self.x - loop.step_size * loop.gradient(self.x), loop.sigma)
        self.x = loop.relax(z, self.x)
        return self.x


SPEC = AlgorithmSpec("pgd", "proximal gradient descent (the reference large-scale "
                            "benchmark's loop)", needs_prox=False, start=ProximalGradient)
