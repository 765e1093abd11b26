"""DPIR (Zhang et al. 2021): half-quadratic splitting whose denoiser level falls
log-linearly from ``dpir_sigma_start`` to ``denoiser_sigma`` over ``max_iter`` iterations,
with the data prox's gamma_k = (sigma_k / max(0.01, denoiser_sigma))^2 / dpir_lambda /
||A||^2. The schedule was designed for operators of norm about 1 (blurs, downsamplings);
dividing by ||A||^2 keeps its balance between data and prior on operators whose norm is
far from 1 (CT projectors): it is deepinv's schedule where ||A|| = 1."""

from __future__ import annotations

import math

from scalebench.loops.algorithms.spec import AlgorithmSpec

# The schedule's floor in the prox weight: below it, gamma_k would grow without bound.
SIGMA_FLOOR = 0.01


def schedule(sigma_start: float, sigma_end: float, iterations: int,
             weight: float) -> list[tuple[float, float]]:
    """(sigma_k, gamma_k) of each iteration: sigma log-spaced from start to end."""
    if iterations == 1:
        sigmas = [sigma_end]
    else:
        first, last = math.log10(sigma_start), math.log10(sigma_end)
        sigmas = [10 ** (first + (last - first) * k / (iterations - 1))
                  for k in range(iterations)]
    return [(s, (s / max(SIGMA_FLOOR, sigma_end)) ** 2 / weight) for s in sigmas]


class DecreasingSplitting:
    def __init__(self, loop, x0) -> None:
        p = loop.params
        self.x = x0
        self.levels = [(sigma, gamma / loop.lipschitz) for sigma, gamma in
                       schedule(p["dpir_sigma_start"], loop.sigma, p["max_iter"],
                                p["dpir_lambda"])]

    def step(self, loop, k: int):
        sigma, gamma = self.levels[k]
        self.x = loop.denoise(loop.data_prox(self.x, gamma), sigma)
        return self.x


SPEC = AlgorithmSpec("dpir", "half-quadratic splitting with a decreasing denoiser level "
                             "(DPIR schedule over max_iter)", needs_prox=True,
                     start=DecreasingSplitting, uses_step=False)
