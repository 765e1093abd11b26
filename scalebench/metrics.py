"""Reconstruction quality metrics, computed in float64 on tensors shaped (B, C, *spatial).

All metrics compare an estimate ``x_hat`` with the ground truth ``x``. The data range used by
PSNR and SSIM is ``max(x) - min(x)`` of the ground truth.

asinh-PSNR (for high-dynamic-range images such as radio sky maps, where plain PSNR is dominated
by a few bright sources): both images are stretched by

    s(v) = asinh(v / a) / asinh(m / a),   m = max(|x|),   a = ASINH_SOFTENING * m,

which is close to linear below ``a`` and logarithmic above it, and maps the ground truth into
[-1, 1]. Then ``asinh_psnr = 10 * log10(1 / mean((s(x_hat) - s(x))**2))``, i.e. the PSNR of the
stretched images with a peak of 1.
"""

from __future__ import annotations

import math

import torch

ASINH_SOFTENING = 0.01  # a = 1% of the ground truth's peak magnitude
SSIM_SIGMA = 1.5  # Gaussian window of Wang et al. (2004): sigma 1.5, radius 5 (11 taps)
SSIM_RADIUS = 5
SSIM_K1, SSIM_K2 = 0.01, 0.03


def _as_float64(*tensors: torch.Tensor) -> list[torch.Tensor]:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f"metric inputs must have one shape, got {sorted(shapes)}")
    return [t.detach().to(torch.float64) for t in tensors]


def _psnr_from_mse(mse: float, peak: float) -> float:
    if mse == 0.0:
        return math.inf
    return 10.0 * math.log10(peak**2 / mse)


def mse(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """Mean squared error over all entries."""
    x_hat, x = _as_float64(x_hat, x)
    return torch.mean((x_hat - x) ** 2).item()


def data_range(x: torch.Tensor) -> float:
    """Dynamic range of the ground truth, the peak used by PSNR and SSIM."""
    return (x.max() - x.min()).item()


def psnr(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """PSNR in dB with the ground truth's data range as peak."""
    return _psnr_from_mse(mse(x_hat, x), data_range(x))


def asinh_stretch(v: torch.Tensor, peak: float) -> torch.Tensor:
    """The asinh stretch s(v) of the module docstring, for a ground truth of peak ``peak``."""
    a = ASINH_SOFTENING * peak
    return torch.asinh(v / a) / math.asinh(peak / a)


def asinh_psnr(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """PSNR in dB of the asinh-stretched images (see the module docstring)."""
    x_hat, x = _as_float64(x_hat, x)
    peak = x.abs().max().item()
    if peak == 0.0:
        raise ValueError("asinh-PSNR needs a ground truth that is not identically zero")
    stretched_mse = torch.mean((asinh_stretch(x_hat, peak) - asinh_stretch(x, peak)) ** 2).item()
    return _psnr_from_mse(stretched_mse, 1.0)


def _gaussian_taps() -> torch.Tensor:
    offsets = torch.arange(-SSIM_RADIUS, SSIM_RADIUS + 1, dtype=torch.float64)
    taps = torch.exp(-(offsets**2) / (2 * SSIM_SIGMA**2))
    return taps / taps.sum()


def _gaussian_filter_valid(v: torch.Tensor) -> torch.Tensor:
    """Separable Gaussian filter over every spatial axis, keeping only fully covered samples."""
    taps = _gaussian_taps().to(v.device)
    spatial_dims = v.ndim - 2
    for axis in range(spatial_dims):
        v = v.movedim(2 + axis, -1)
        v = v.unfold(-1, taps.numel(), 1) @ taps
        v = v.movedim(-1, 2 + axis)
    return v


def ssim(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """Mean structural similarity (Gaussian window, sigma 1.5) over channels and valid pixels.

    The window radius is 5: borders of 5 samples have no complete window and are left out, as
    in the reference definition. Works for 2D images and 3D volumes.
    """
    x_hat, x = _as_float64(x_hat, x)
    if min(x.shape[2:]) <= 2 * SSIM_RADIUS:
        raise ValueError(f"SSIM needs every spatial size > {2 * SSIM_RADIUS}, got {x.shape[2:]}")
    peak = data_range(x)
    c1, c2 = (SSIM_K1 * peak) ** 2, (SSIM_K2 * peak) ** 2
    mu_a, mu_b = _gaussian_filter_valid(x_hat), _gaussian_filter_valid(x)
    var_a = _gaussian_filter_valid(x_hat * x_hat) - mu_a**2
    var_b = _gaussian_filter_valid(x * x) - mu_b**2
    cov = _gaussian_filter_valid(x_hat * x) - mu_a * mu_b
    numerator = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    denominator = (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    return torch.mean(numerator / denominator).item()


def quality_metrics(x_hat: torch.Tensor, x: torch.Tensor) -> dict[str, float]:
    """Every quality metric of the benchmark, keyed by its result column name."""
    return {
        "psnr_db": psnr(x_hat, x),
        "ssim": ssim(x_hat, x),
        "mse": mse(x_hat, x),
        "asinh_psnr_db": asinh_psnr(x_hat, x),
    }
