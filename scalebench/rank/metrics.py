"""Reconstruction quality metrics of tensors shaped (B, C, *spatial), on their own device.

All metrics compare an estimate ``x_hat`` with the ground truth ``x``. The data range used by
PSNR and SSIM is ``max(x) - min(x)`` of the ground truth; a constant ground truth has none and
is refused.

Every metric runs on the device the tensors live on, in float64, block by block: a block of
the image is converted to float64, reduced, and dropped, so that the extra memory stays
bounded (``working_set_bytes``: about the image's own size, and at least ``MIN_WORKING_SET``)
whatever the image size, and the results equal the whole-image float64 computation up to
rounding (relative differences around 1e-15).

Reconstruction SNR (the figure of radio-interferometric imaging papers, e.g. the AIRI and R2D2
series): ``snr_db = 10 * log10(||x||^2 / ||x - x_hat||^2)``. It needs no peak, so a dark
background cannot inflate it, and an all-zero estimate scores exactly 0 dB whatever the image.

asinh-PSNR (for high-dynamic-range images such as radio sky maps, where plain PSNR is dominated
by a few bright sources): both images are stretched by

    s(v) = asinh(v / a) / asinh(m / a),   m = max(|x|),   a = m / D,

which is close to linear below ``a`` and logarithmic above it, and maps the ground truth into
[-1, 1]. Then ``asinh_psnr = 10 * log10(1 / mean((s(x_hat) - s(x))**2))``, i.e. the PSNR of the
stretched images with a peak of 1. ``D`` is the dynamic range the score should cover: the
softening ``a`` (Lupton et al. 1999, AJ 118, 1406) sits at the faintest level that matters, the
noise level or ``m`` over the target dynamic range, as the logarithmic SNR of radio imaging
papers does with its own scale parameter. Problems declare it (radio interferometry: its
``dynamic_range``); others get ``DEFAULT_DYNAMIC_RANGE``.

A diverging estimate (any NaN or infinite entry, or entries so large that their squared error
overflows) gives NaN for every metric and ``diverged`` true (``quality_metrics``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch

from scalebench.rank.names import METRIC_NAMES

DEFAULT_DYNAMIC_RANGE = 100.0  # a = 1% of the ground truth's peak magnitude
SSIM_SIGMA = 1.5  # Gaussian window of Wang et al. (2004): sigma 1.5, radius 5 (11 taps)
SSIM_RADIUS = 5
SSIM_K1, SSIM_K2 = 0.01, 0.03
MIN_WORKING_SET = 4 * 2**20  # bytes: small images get blocks of at least this working set
# float64 block-sized arrays alive at once in SSIM: both inputs, a product, five filtered
# maps, a filtering intermediate and the terms of the SSIM map.
_SSIM_ARRAYS = 12
_FLAT_ARRAYS = 4  # both inputs (overwritten in place by the terms) and reduction scratch


def _check_shapes(x_hat: torch.Tensor, x: torch.Tensor) -> None:
    if x_hat.shape != x.shape:
        raise ValueError(f"metric inputs must have one shape, got {tuple(x_hat.shape)} and "
                         f"{tuple(x.shape)}")


def working_set_bytes(x: torch.Tensor) -> int:
    """Float64 working set the metrics allow themselves for an image like ``x``."""
    return max(x.numel() * x.element_size(), MIN_WORKING_SET)


def _float64_copy(v: torch.Tensor) -> torch.Tensor:
    """A float64 copy that the metrics may overwrite (never the caller's tensor)."""
    return v.detach().to(torch.float64, copy=True)


def _flat_blocks(x_hat: torch.Tensor, x: torch.Tensor) -> Iterator[tuple[torch.Tensor, ...]]:
    """Matching float64 copies of blocks of both tensors, flattened."""
    a, b = x_hat.detach().reshape(-1), x.detach().reshape(-1)
    step = max(working_set_bytes(x) // (8 * _FLAT_ARRAYS), 1)
    for start in range(0, a.numel(), step):
        yield _float64_copy(a[start:start + step]), _float64_copy(b[start:start + step])


def _mean_of(x_hat: torch.Tensor, x: torch.Tensor,
             term: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> float:
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    for a, b in _flat_blocks(x_hat, x):
        total += term(a, b).sum()
    return total.item() / x.numel()  # one device synchronisation per metric


def _psnr_from_mse(mse: float, peak: float) -> float:
    if math.isnan(mse):
        return math.nan
    if mse == 0.0:
        return math.inf
    return 10.0 * math.log10(peak**2 / mse)


def mse(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """Mean squared error over all entries."""
    _check_shapes(x_hat, x)
    return _mean_of(x_hat, x, lambda a, b: a.sub_(b).square_())


def data_range(x: torch.Tensor) -> float:
    """Dynamic range of the ground truth, the peak used by PSNR and SSIM (refused if 0)."""
    peak = (x.max().double() - x.min().double()).item()
    if not peak > 0.0:
        raise ValueError(f"the ground truth is constant (data range {peak}): PSNR and SSIM "
                         f"need a ground truth whose maximum exceeds its minimum")
    return peak


def psnr(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """PSNR in dB with the ground truth's data range as peak."""
    return _psnr_from_mse(mse(x_hat, x), data_range(x))


def _snr_from(squared_error: float, energy: float) -> float:
    """SNR in dB from the mean squared error and the ground truth's mean square."""
    if math.isnan(squared_error):
        return math.nan
    if squared_error == 0.0:
        return math.inf
    return 10.0 * math.log10(energy / squared_error)


def _energy(x: torch.Tensor) -> float:
    """Mean square of the ground truth (refused when it is identically zero)."""
    energy = _mean_of(x, x, lambda a, _: a.square_())
    if energy == 0.0:
        raise ValueError("SNR needs a ground truth that is not identically zero")
    return energy


def snr(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """Reconstruction SNR in dB, 10 log10(||x||^2 / ||x - x_hat||^2); 0 dB for x_hat = 0."""
    _check_shapes(x_hat, x)
    return _snr_from(mse(x_hat, x), _energy(x))


def asinh_stretch(v: torch.Tensor, peak: float,
                  dynamic_range: float = DEFAULT_DYNAMIC_RANGE) -> torch.Tensor:
    """The asinh stretch s(v) of the module docstring, for a ground truth of peak ``peak``."""
    return _asinh_stretch_(v.clone(), peak, dynamic_range)


def _asinh_stretch_(v: torch.Tensor, peak: float, dynamic_range: float) -> torch.Tensor:
    """``asinh_stretch`` computed in place in ``v``."""
    a = peak / dynamic_range
    return v.div_(a).asinh_().div_(math.asinh(dynamic_range))


def asinh_psnr(x_hat: torch.Tensor, x: torch.Tensor,
               dynamic_range: float = DEFAULT_DYNAMIC_RANGE) -> float:
    """PSNR in dB of the asinh-stretched images (see the module docstring)."""
    _check_shapes(x_hat, x)
    if not (math.isfinite(dynamic_range) and dynamic_range >= 1.0):
        raise ValueError(f"asinh-PSNR needs a finite dynamic range >= 1, got {dynamic_range}")
    peak = x.detach().abs().max().double().item()
    if peak == 0.0:
        raise ValueError("asinh-PSNR needs a ground truth that is not identically zero")
    stretched_mse = _mean_of(
        x_hat, x, lambda a, b: _asinh_stretch_(a, peak, dynamic_range).sub_(
            _asinh_stretch_(b, peak, dynamic_range)).square_())
    return _psnr_from_mse(stretched_mse, 1.0)


def _gaussian_taps() -> list[float]:
    offsets = torch.arange(-SSIM_RADIUS, SSIM_RADIUS + 1, dtype=torch.float64)
    taps = torch.exp(-(offsets**2) / (2 * SSIM_SIGMA**2))
    return (taps / taps.sum()).tolist()


def _gaussian_filter_valid(v: torch.Tensor, taps: list[float]) -> torch.Tensor:
    """Separable Gaussian filter over every axis of ``v``, keeping fully covered samples.

    Accumulates shifted slices in place: no windowed copy of the input is ever built.
    """
    for axis in range(v.ndim):
        length = v.shape[axis] - len(taps) + 1
        out = v.narrow(axis, 0, length) * taps[0]
        for offset, tap in enumerate(taps[1:], start=1):
            out.add_(v.narrow(axis, offset, length), alpha=tap)
        v = out
    return v


def _ssim_block_sum(a: torch.Tensor, b: torch.Tensor, c1: float, c2: float,
                    taps: list[float]) -> torch.Tensor:
    """Sum of the SSIM map over the fully covered samples of a float64 block."""
    mu_a, mu_b = _gaussian_filter_valid(a, taps), _gaussian_filter_valid(b, taps)
    var_a = _gaussian_filter_valid(a * a, taps).sub_(mu_a.square())
    var_b = _gaussian_filter_valid(b * b, taps).sub_(mu_b.square())
    cov = _gaussian_filter_valid(a * b, taps).sub_(mu_a * mu_b)
    numerator = (2 * mu_a * mu_b + c1).mul_(cov.mul_(2).add_(c2))
    denominator = (mu_a.square_() + mu_b.square_() + c1).mul_(var_a.add_(var_b).add_(c2))
    return numerator.div_(denominator).sum()


def ssim(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """Mean structural similarity (Gaussian window, sigma 1.5) over channels and valid pixels.

    The window radius is 5: borders of 5 samples have no complete window and are left out, as
    in the reference definition. Works for 2D images and 3D volumes. Computed per image and
    channel in blocks along the first spatial axis (each with its 10-sample halo).
    """
    _check_shapes(x_hat, x)
    spatial = x.shape[2:]
    if min(spatial) <= 2 * SSIM_RADIUS:
        raise ValueError(f"SSIM needs every spatial size > {2 * SSIM_RADIUS}, got "
                         f"{tuple(spatial)}")
    peak = data_range(x)
    c1, c2 = (SSIM_K1 * peak) ** 2, (SSIM_K2 * peak) ** 2
    taps, halo = _gaussian_taps(), 2 * SSIM_RADIUS
    slice_size = math.prod(spatial[1:])
    rows = max(working_set_bytes(x) // (8 * _SSIM_ARRAYS * slice_size) - halo, 1)
    valid_rows = spatial[0] - halo
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    for image in range(x.shape[0]):
        for channel in range(x.shape[1]):
            for first in range(0, valid_rows, rows):
                block = slice(first, min(first + rows, valid_rows) + halo)
                total += _ssim_block_sum(_float64_copy(x_hat[image, channel, block]),
                                         _float64_copy(x[image, channel, block]), c1, c2,
                                         taps)
    count = x.shape[0] * x.shape[1] * math.prod(n - halo for n in spatial)
    return total.item() / count


def quality_metrics(x_hat: torch.Tensor, x: torch.Tensor,
                    dynamic_range: float = DEFAULT_DYNAMIC_RANGE) -> dict[str, float | bool]:
    """Every quality metric of the benchmark, keyed by its result column name;
    ``dynamic_range``: the asinh-PSNR's (see the module docstring).

    A diverging estimate (non-finite entries) gives NaN metrics and ``diverged`` true.
    """
    squared_error = mse(x_hat, x)
    if not math.isfinite(squared_error):
        return {**dict.fromkeys(METRIC_NAMES, math.nan), "diverged": True}
    return {
        "psnr_db": _psnr_from_mse(squared_error, data_range(x)),
        "ssim": ssim(x_hat, x),
        "mse": squared_error,
        "snr_db": _snr_from(squared_error, _energy(x)),
        "asinh_psnr_db": asinh_psnr(x_hat, x, dynamic_range),
        "diverged": False,
    }
