"""Wavelet soft-thresholding: deepinv's WaveletDenoiser (ptwt's 2D transform, Daubechies 8,
3 levels, zero boundaries), the threshold being the noise level sigma; no weights, 2D only.

Its reach: a level-J coefficient depends on (L - 1)(2^J - 1) + 1 consecutive pixels (L = 16
taps of Daubechies 8, J = 3), and an output pixel on the coefficients whose synthesis spans
as many: an input pixel changes outputs at most 2 (L - 1)(2^J - 1) = 210 pixels away,
whatever the image's side and the padding of its odd-length levels. Measured, an impulse
(over the 64 positions of the 8x8 decimation grid) reaches 89 to 135 pixels depending on the
side, and tiles overlapping by 135 still differ by 1e-6 at some window sides: the bound, not
a measured reach, is what makes every tiling exact (tests/unit/test_registries.py and
test_solvers.py). The transform is not shift-invariant: windows must start on the 8-pixel
grid of its three decimations by 2, as DRUNet's, hence size_multiple 8."""

from __future__ import annotations

from scalebench.denoisers.spec import DenoiserSpec

LEVELS, WAVELET, TAPS = 3, "db8", 16


def build(channels: int, weights, device):
    from deepinv.models import WaveletDenoiser

    return WaveletDenoiser(level=LEVELS, wv=WAVELET, mode="zero", device=device).to(device)


SPEC = DenoiserSpec("wavelet", "wavelet soft-thresholding (Daubechies 8, 3 levels), no weights",
                    size_multiple=2 ** LEVELS,
                    receptive_radius=2 * (TAPS - 1) * (2 ** LEVELS - 1), volumes=False,
                    build=build)
