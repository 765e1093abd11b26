"""Standalone denoiser timing: denoise the same noisy ground truth once per iteration."""

from __future__ import annotations

import hashlib

import torch
from torch import nn

from provenance import array_digest
from scalebench.rank.profiling import StepProfiler


def ground_truth_digest(x_true: torch.Tensor) -> str:
    """Digest of the data a denoiser run uses: the ground truth alone."""
    return hashlib.sha256(array_digest(x_true).encode()).hexdigest()


def noisy_copy(x_true: torch.Tensor, sigma: float, seed: int) -> torch.Tensor:
    """x_true plus white Gaussian noise of standard deviation ``sigma`` (seeded)."""
    # Drawn on the CPU: the same noise on every device and every rank.
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(x_true.shape, generator=generator, dtype=x_true.dtype)
    return x_true + sigma * noise.to(x_true.device)


class DenoisingLoop:
    """Each ``iterate()`` denoises ``noisy`` again inside the profiler's "denoise" step."""

    def __init__(self, x_true: torch.Tensor, denoiser: nn.Module, sigma: float, seed: int,
                 profiler: StepProfiler) -> None:
        self.noisy = noisy_copy(x_true, sigma, seed)
        self.denoiser = denoiser
        self.sigma = sigma
        self.profiler = profiler
        self.x = self.noisy

    @torch.no_grad()
    def iterate(self) -> None:
        with self.profiler.step("denoise"):
            self.x = self.denoiser(self.noisy, self.sigma)
