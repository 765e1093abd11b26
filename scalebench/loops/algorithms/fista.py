"""Accelerated proximal gradient (FISTA, Chambolle-Dossal momentum):
x_{k+1} = D_sigma(z_k - gamma grad f(z_k)), z_{k+1} = x_{k+1} + (k + a - 1) / (k + a)
(x_{k+1} - x_k)."""

from __future__ import annotations

from scalebench.loops.algorithms.spec import AlgorithmSpec


class AcceleratedGradient:
    def __init__(self, loop, x0) -> None:
        self.x, self.z = x0, x0

    def step(self, loop, k: int):
        a = loop.params["fista_a"]
        x = loop.denoise(self.z - loop.step_size * loop.gradient(self.z), loop.sigma)
        self.z = x + (k + a - 1) / (k + a) * (x - self.x)
        self.x = x
        return x


SPEC = AlgorithmSpec("fista", "accelerated proximal gradient (FISTA momentum)",
                     needs_prox=False, start=AcceleratedGradient)
