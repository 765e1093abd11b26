"""Filtered back-projection for 2D parallel-beam CT (tomography_2d): each projection is
filtered along the detector by a ramp-family filter, then back-projected by the problem's own
operator's adjoint A^T (torch, ASTRA or deepinv projector alike) and scaled by pi / angles.

The ramp is the band-limited one of Kak & Slaney (Principles of Computerized Tomographic
Imaging, ch. 3, eq. 61): its spatial samples h(0) = 1/4, h(n) = -1 / (pi n)^2 for odd n, 0
for even n, taken to the frequency domain after zero-padding the projections to at least
twice the detector (no wrap-around) and a power of two. Sampling the ramp in space rather than
|f| in frequency keeps the DC term right (no offset in the reconstruction). The windows damp
high frequencies: shepp-logan sinc, cosine, hamming, hann.

The filtering is per angle and needs no communication; with distributed physics each rank
filters its own angles and the adjoint's all-reduce sums the back-projections.
"""

from __future__ import annotations

import math

import torch

from scalebench.loops.inference_parameters import FBP_FILTERS
from scalebench.problems.base import Problem
from scalebench.rank.profiling import StepProfiler

FILTERS = FBP_FILTERS


def padded_length(detectors: int) -> int:
    """Padded projection length: a power of two, at least twice the detector and 64."""
    return max(64, 2 ** math.ceil(math.log2(2 * detectors)))


def frequency_filter(name: str, length: int) -> torch.Tensor:
    """The filter's response at the ``length`` DFT frequencies (numpy's fft order), float64."""
    if name not in FILTERS:
        raise ValueError(f"unknown filter '{name}' (allowed: {', '.join(FILTERS)})")
    n = torch.arange(length, dtype=torch.float64)
    offset = torch.minimum(n, length - n)  # |n| of each sample on the circle
    spatial = torch.where(offset % 2 == 1, -1.0 / (math.pi * offset.clamp(min=1)) ** 2, 0.0)
    spatial[0] = 0.25
    ramp = 2.0 * torch.fft.fft(spatial).real  # 2 h: its scale pairs with pi / (2 angles)
    frequency = torch.fft.fftfreq(length, dtype=torch.float64)  # cycles per cell, [-1/2, 1/2)
    if name == "ram-lak":
        return ramp
    if name == "shepp-logan":
        omega = math.pi * frequency
        return ramp * torch.where(omega == 0, 1.0, torch.sin(omega) / torch.where(
            omega == 0, 1.0, omega))
    if name == "cosine":
        return ramp * torch.cos(math.pi * frequency)
    # hamming and hann: the raised cosine 1 at frequency 0 and (1 - 2 a) at 1/2
    a = 0.46 if name == "hamming" else 0.5
    return ramp * ((1 - a) + a * torch.cos(2 * math.pi * frequency))


def filter_projections(sinogram: torch.Tensor, response: torch.Tensor, dim: int = -2
                       ) -> torch.Tensor:
    """Projections filtered along their detector axis ``dim`` by ``response`` (the padded
    length's DFT frequencies), in float64 and cast back: a sinogram (B, C, W, angles) along
    W (the default), cone-beam data (B, C, views, rows, cols) along its rows (dim -1)."""
    moved = sinogram.movedim(dim, -1)
    detectors = moved.shape[-1]
    spectrum = torch.fft.fft(moved.double(), n=len(response), dim=-1)
    filtered = torch.fft.ifft(spectrum * response.to(sinogram.device), dim=-1).real
    return filtered[..., :detectors].movedim(-1, dim).to(sinogram.dtype)


def filtered_back_projection(problem: Problem, filter_name: str, num_angles: int
                             ) -> torch.Tensor:
    """FBP of the problem's sinograms over every one of its ``num_angles`` angles (each
    rank's operators hold a share of them; the adjoint sums the shares)."""
    detectors = problem.y[0].shape[-2]
    response = frequency_filter(filter_name, padded_length(detectors))
    filtered = type(problem.y)([filter_projections(y_k, response) for y_k in problem.y])
    return problem.physics.A_adjoint(filtered) * (math.pi / (2 * num_angles))


class FBPLoop:
    """Starts from the zero image; its one iteration is the FBP, in the "backproject" step."""

    def __init__(self, problem: Problem, filter_name: str, profiler: StepProfiler) -> None:
        self.problem, self.filter_name, self.profiler = problem, filter_name, profiler
        self.num_angles = int(problem.source["params"]["num_angles"])
        self.x = torch.zeros_like(problem.x_true)

    @torch.no_grad()
    def iterate(self) -> None:
        with self.profiler.step("backproject"):
            self.x = filtered_back_projection(self.problem, self.filter_name, self.num_angles)
