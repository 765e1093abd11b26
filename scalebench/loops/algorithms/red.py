"""Regularisation by denoising, gradient form:
x <- x - gamma (grad f(x) + lambda (x - D_sigma(x)))."""

from __future__ import annotations

from scalebench.loops.algorithms.spec import AlgorithmSpec


class DenoisingRegularisation:
    def __init__(self, loop, x0) -> None:
        self.x = x0

    def step(self, loop, k: int):
        gradient = loop.gradient(self.x)
        prior = self.x - loop.denoise(self.x, loop.sigma)
        self.x = self.x - loop.step_size * (gradient + loop.params["red_lambda"] * prior)
        return self.x


SPEC = AlgorithmSpec("red", "regularisation by denoising (gradient descent)",
                     needs_prox=False, start=DenoisingRegularisation)
