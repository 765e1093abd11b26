"""Half-quadratic splitting: u = prox_{gamma f}(x), x <- beta D_sigma(u) + (1 - beta) x."""

from __future__ import annotations

from scalebench.loops.algorithms.spec import PROX_STEP, AlgorithmSpec


class HalfQuadraticSplitting:
    def __init__(self, loop, x0) -> None:
        self.x = x0

    def step(self, loop, k: int):
        u = loop.data_prox(self.x, loop.step_size)
        self.x = loop.relax(loop.denoise(u, loop.sigma), self.x)
        return self.x


SPEC = AlgorithmSpec("hqs", "half-quadratic splitting (data prox, then denoiser)",
                     needs_prox=True, start=HalfQuadraticSplitting, default_step_scale=PROX_STEP)
