"""Ground-truth images: package-shipped pictures resized on the fly, or generated ones."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


def _resize(image: torch.Tensor, size: int) -> torch.Tensor:
    """(1, C, H, W) image resized to size x size, antialiased, clipped to [0, 1]."""
    resized = F.interpolate(image, size=(size, size), mode="bilinear", antialias=True,
                            align_corners=False)
    return resized.clamp(0.0, 1.0).contiguous()


def shepp_logan(size: int) -> torch.Tensor:
    """Shepp-Logan phantom (shipped with scikit-image), shape (1, 1, size, size), in [0, 1]."""
    from skimage.data import shepp_logan_phantom

    phantom = torch.from_numpy(np.ascontiguousarray(shepp_logan_phantom(), dtype=np.float32))
    return _resize(phantom[None, None], size)


def astronaut(size: int) -> torch.Tensor:
    """Colour photograph shipped with scikit-image, shape (1, 3, size, size), in [0, 1]."""
    from skimage.data import astronaut as load

    rgb = torch.from_numpy(np.ascontiguousarray(load())).permute(2, 0, 1).float() / 255.0
    return _resize(rgb[None], size)


def random_ellipses(size: int, channels: int, seed: int, count: int = 24) -> torch.Tensor:
    """A piecewise-smooth image of random overlapping ellipses at any size, in [0, 1].

    Built in row blocks so that memory stays a few rows of float32 per ellipse, whatever the
    size; the same seed gives the same picture at every size (up to sampling).
    """
    generator = torch.Generator().manual_seed(seed)
    centres = torch.rand(count, 2, generator=generator)
    radii = 0.05 + 0.3 * torch.rand(count, 2, generator=generator)
    angles = math.pi * torch.rand(count, generator=generator)
    colours = torch.rand(count, channels, generator=generator) * 0.6 - 0.2
    image = torch.zeros(1, channels, size, size)
    coords = (torch.arange(size, dtype=torch.float32) + 0.5) / size
    cos, sin = torch.cos(angles), torch.sin(angles)
    block = max(1, 2**22 // (size * count))
    for start in range(0, size, block):
        rows = coords[start:start + block]
        dy = rows[None, :, None] - centres[:, 1, None, None]
        dx = coords[None, None, :] - centres[:, 0, None, None]
        u = (dx * cos[:, None, None] + dy * sin[:, None, None]) / radii[:, 0, None, None]
        v = (-dx * sin[:, None, None] + dy * cos[:, None, None]) / radii[:, 1, None, None]
        inside = ((u**2 + v**2) <= 1.0).float()  # (count, rows, size)
        image[0, :, start:start + block] = torch.einsum("krs,kc->crs", inside, colours)
    return (image + 0.3).clamp(0.0, 1.0)
