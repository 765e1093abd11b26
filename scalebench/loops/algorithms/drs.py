"""Douglas-Rachford splitting: u = prox_{gamma f}(z), x = D_sigma(2u - z),
z <- z + beta (x - u); z starts at x0."""

from __future__ import annotations

from scalebench.loops.algorithms.spec import PROX_STEP, AlgorithmSpec


class DouglasRachford:
    def __init__(self, loop, x0) -> None:
        self.x, self.z = x0, x0

    def step(self, loop, k: int):
        u = loop.data_prox(self.z, loop.step_size)
        self.x = loop.denoise(2 * u - self.z, loop.sigma)
        self.z = self.z + loop.params["relaxation"] * (self.x - u)
        return self.x


SPEC = AlgorithmSpec("drs", "Douglas-Rachford splitting", needs_prox=True,
                     start=DouglasRachford, default_step_scale=PROX_STEP)
