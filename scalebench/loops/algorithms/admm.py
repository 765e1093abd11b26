"""ADMM (scaled form, z the scaled dual): u = prox_{gamma f}(x - z), x = D_sigma(u + z),
z <- z + beta (u - x); z starts at 0."""

from __future__ import annotations

from scalebench.loops.algorithms.spec import PROX_STEP, AlgorithmSpec


class AlternatingDirections:
    def __init__(self, loop, x0) -> None:
        self.x, self.z = x0, x0 * 0

    def step(self, loop, k: int):
        u = loop.data_prox(self.x - self.z, loop.step_size)
        self.x = loop.denoise(u + self.z, loop.sigma)
        self.z = self.z + loop.params["relaxation"] * (u - self.x)
        return self.x


SPEC = AlgorithmSpec("admm", "alternating direction method of multipliers",
                     needs_prox=True, start=AlternatingDirections, default_step_scale=PROX_STEP)
