"""Blur then subsample, y = (h * x)[::f, ::f], with circular boundaries, at any image size.

The same operator as deepinv's ``Downsampling(filter=h, padding='circular')`` (it calls the
same spatial convolutions, so the numbers are identical) without the three full-size complex
Fourier transforms of the filter that deepinv precomputes for its closed-form proximal step:
at 4096^2 those are 384 MiB per frame, while this operator stores only the filter.
"""

from __future__ import annotations

import torch
from deepinv.physics import LinearPhysics
from deepinv.physics import functional as dF


class BlurDownsampling(LinearPhysics):
    """A x = (h * x) subsampled by ``factor``; A^T y = h^T * (y upsampled with zeros)."""

    def __init__(self, kernel: torch.Tensor, factor: int) -> None:
        super().__init__()
        self.register_buffer("kernel", kernel)  # (1, 1, k, k), applied to every channel
        self.factor = factor

    def A(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        blurred = dF.conv2d(x, self.kernel, padding="circular")
        return blurred[..., ::self.factor, ::self.factor]

    def A_adjoint(self, y: torch.Tensor, **kwargs) -> torch.Tensor:
        shape = (*y.shape[:-2], y.shape[-2] * self.factor, y.shape[-1] * self.factor)
        upsampled = torch.zeros(shape, dtype=y.dtype, device=y.device)
        upsampled[..., ::self.factor, ::self.factor] = y
        return dF.conv_transpose2d(upsampled, self.kernel, padding="circular")
