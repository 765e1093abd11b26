"""Ground-truth images: package-shipped pictures resized on the fly, or generated ones."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


def _resize(image: torch.Tensor, size: int) -> torch.Tensor:
    """(1, C, H, W) image resized to size x size, antialiased, clipped to [0, 1].

    The interpolation writes the only full-size tensor; clipping happens in place, so a
    16-megapixel colour image costs its own 192 MiB and nothing more.
    """
    resized = F.interpolate(image, size=(size, size), mode="bilinear", antialias=True,
                            align_corners=False)
    return resized.clamp_(0.0, 1.0)


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


def _rotation(angles: torch.Tensor) -> torch.Tensor:
    """(count, 3, 3) rotations: about z by angles[:, 0], then about x by angles[:, 1]."""
    cz, sz = torch.cos(angles[:, 0]), torch.sin(angles[:, 0])
    cx, sx = torch.cos(angles[:, 1]), torch.sin(angles[:, 1])
    zero, one = torch.zeros_like(cz), torch.ones_like(cz)
    about_z = torch.stack([cz, -sz, zero, sz, cz, zero, zero, zero, one], 1).reshape(-1, 3, 3)
    about_x = torch.stack([one, zero, zero, zero, cx, -sx, zero, sx, cx], 1).reshape(-1, 3, 3)
    return about_x @ about_z


def _voxel_range(centre: float, extent: float, size: int) -> tuple[int, int]:
    """Indices [first, last) of the voxels whose centres lie within centre +- extent."""
    first = max(0, math.ceil((centre - extent) * size - 0.5))
    return first, min(size, math.floor((centre + extent) * size - 0.5) + 1)


def random_ellipsoids(size: int, channels: int, seed: int, count: int = 24) -> torch.Tensor:
    """A piecewise-constant volume of random overlapping ellipsoids, (1, C, size, size, size).

    Each ellipsoid is painted (added, in a fixed order) inside its bounding box only, in z
    slabs of about 2^22 voxels: work follows the ellipsoids' volume and the temporaries stay
    small whatever the size; only the volume itself is full-size.
    """
    generator = torch.Generator().manual_seed(seed)
    centres = torch.rand(count, 3, generator=generator)  # (x, y, z) in [0, 1]
    radii = 0.05 + 0.3 * torch.rand(count, 3, generator=generator)
    rotation = _rotation(math.pi * torch.rand(count, 2, generator=generator))
    colours = torch.rand(count, channels, generator=generator) * 0.6 - 0.2
    # half-extent of ellipsoid k along axis i: || column i of diag(r_k) R_k ||
    extents = (rotation * radii[:, :, None]).norm(dim=1)
    volume = torch.zeros(1, channels, size, size, size)
    coords = (torch.arange(size, dtype=torch.float32) + 0.5) / size
    for k in range(count):
        (x0, x1), (y0, y1), (z0, z1) = (
            _voxel_range(float(centres[k, i]), float(extents[k, i]), size) for i in range(3))
        slab = max(1, 2**22 // max(1, (x1 - x0) * (y1 - y0)))
        for start in range(z0, z1, slab):
            stop = min(start + slab, z1)
            offsets = [coords[None, None, x0:x1] - centres[k, 0],
                       coords[None, y0:y1, None] - centres[k, 1],
                       coords[start:stop, None, None] - centres[k, 2]]
            radius = sum((sum(rotation[k, axis, i] * offsets[i] for i in range(3))
                          / radii[k, axis]) ** 2 for axis in range(3))
            inside = (radius <= 1.0).float()  # (slab, rows, columns)
            volume[0, :, start:stop, y0:y1, x0:x1] += colours[k, :, None, None, None] * inside
    return volume.add_(0.3).clamp_(0.0, 1.0)
