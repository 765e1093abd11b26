"""Blur then subsample, y = (h * x)[::f, ::f], with circular boundaries, at any image size.

The operator of deepinv's ``Downsampling(filter=h, padding='circular')``, same padding and
kernel alignment, equal to it up to float rounding, but computed leaner: the blur is
evaluated only where the subsampling keeps it (a strided convolution: 1/f^2 of the work and
of the temporaries), the adjoint is one strided transposed convolution whose margins are
folded back circularly, and nothing but the kernel is stored. deepinv precomputes three
full-size Fourier transforms of the filter for its closed-form proximal step: at 4096^2 those
are 384 MiB per frame.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from deepinv.physics import LinearPhysics


def _pads(size: int) -> tuple[int, int]:
    """(before, after) circular padding of a kernel side, deepinv's alignment."""
    return size // 2 - (size - 1) % 2, size // 2


def _fold(z: torch.Tensor, before: int, after: int, length: int, dim: int) -> torch.Tensor:
    """Adjoint of circular padding along ``dim``: add the margins back onto the far sides."""
    core = z.narrow(dim, before, length).clone()
    if before:
        core.narrow(dim, length - before, before).add_(z.narrow(dim, 0, before))
    if after:
        core.narrow(dim, 0, after).add_(z.narrow(dim, before + length, after))
    return core


class BlurDownsampling(LinearPhysics):
    """A x = (h * x) subsampled by ``factor``; A^T y = h^T * (y upsampled with zeros)."""

    def __init__(self, kernel: torch.Tensor, factor: int) -> None:
        super().__init__()
        self.register_buffer("kernel", kernel)  # (1, 1, k, k), applied to every channel
        self.factor = factor

    def _grouped(self, channels: int) -> torch.Tensor:
        return self.kernel.expand(channels, 1, *self.kernel.shape[-2:])

    def A(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        (top, bottom), (left, right) = (_pads(n) for n in self.kernel.shape[-2:])
        batch, channels = x.shape[:2]
        padded = F.pad(x.reshape(1, batch * channels, *x.shape[-2:]),
                       (left, right, top, bottom), mode="circular")
        out = F.conv2d(padded, self._grouped(batch * channels).flip(-2, -1),
                       stride=self.factor, groups=batch * channels)
        return out.reshape(batch, channels, *out.shape[-2:])

    def A_adjoint(self, y: torch.Tensor, **kwargs) -> torch.Tensor:
        (top, bottom), (left, right) = (_pads(n) for n in self.kernel.shape[-2:])
        batch, channels = y.shape[:2]
        height, width = y.shape[-2] * self.factor, y.shape[-1] * self.factor
        z = F.conv_transpose2d(y.reshape(1, batch * channels, *y.shape[-2:]),
                               self._grouped(batch * channels).flip(-2, -1),
                               stride=self.factor, groups=batch * channels)
        # the rows and columns the zero-upsampled input would add past the last sample
        z = F.pad(z, (0, width + left + right - z.shape[-1],
                      0, height + top + bottom - z.shape[-2]))
        z = _fold(_fold(z, top, bottom, height, -2), left, right, width, -1)
        return z.reshape(batch, channels, height, width)
