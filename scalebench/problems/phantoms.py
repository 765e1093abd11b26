"""Ground-truth images: package-shipped pictures resized on the fly, or generated ones."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from scalebench.problems.images import PHOTOGRAPHS


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


def photograph(name: str, size: int) -> torch.Tensor:
    """A colour photograph of PHOTOGRAPHS, its central square resized to size x size:
    shape (1, 3, size, size), in [0, 1]. Most are 300 to 600 pixels a side: larger sizes
    are interpolated (smooth, without the detail of a larger photograph)."""
    import skimage.data

    if name not in PHOTOGRAPHS:
        raise ValueError(f"no photograph {name!r} (allowed: {', '.join(PHOTOGRAPHS)})")
    pixels = getattr(skimage.data, name)()
    height, width = pixels.shape[:2]
    side = min(height, width)
    top, left = (height - side) // 2, (width - side) // 2
    square = pixels[top:top + side, left:left + side, :3]
    rgb = torch.from_numpy(np.ascontiguousarray(square)).permute(2, 0, 1).float() / 255.0
    return _resize(rgb[None], size)


def astronaut(size: int) -> torch.Tensor:
    """The astronaut photograph (square already), shape (1, 3, size, size), in [0, 1]."""
    return photograph("astronaut", size)


def random_phantom(size: int, seed: int, features: tuple[int, int] = (6, 12)) -> torch.Tensor:
    """A CT phantom drawn from ``seed``: a body (a dense rim around soft tissue, a random
    ellipse) holding a random number within ``features`` of inner ellipses of random
    densities, each painted over those before it (darker cavities and denser structures).
    Shape (1, 1, size, size), zero outside the body, in [0, 1]; the same seed gives the
    same phantom at every size (up to sampling)."""
    generator = torch.Generator().manual_seed(seed)

    def uniform(low: float, high: float, count: int = 1) -> torch.Tensor:
        return low + (high - low) * torch.rand(count, generator=generator)

    body_radii = torch.cat([uniform(0.36, 0.46), uniform(0.28, 0.44)])
    body_angle = float(uniform(-0.3, 0.3))
    rim = float(uniform(0.05, 0.1))  # the rim's thickness, a fraction of the body's radii
    count = int(torch.randint(features[0], features[1] + 1, (1,), generator=generator))
    # Feature centres inside the inner 60% of the body, in the body's own frame.
    radius, angle = 0.6 * uniform(0, 1, count).sqrt(), uniform(0, 2 * math.pi, count)
    local = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], 1) * body_radii
    cos, sin = math.cos(body_angle), math.sin(body_angle)
    centres = 0.5 + local @ torch.tensor([[cos, sin], [-sin, cos]])
    feature_radii = body_radii * (0.05 + 0.25 * torch.rand(count, 2, generator=generator))
    ellipses = [(torch.tensor([0.5, 0.5]), body_radii, body_angle, float(uniform(0.7, 1.0))),
                (torch.tensor([0.5, 0.5]), body_radii * (1 - rim), body_angle,
                 float(uniform(0.15, 0.3)))]
    ellipses += [(centres[k], feature_radii[k], float(uniform(0, math.pi)),
                  float(uniform(0.0, 0.6))) for k in range(count)]
    return _paint(size, ellipses)


def _paint(size: int, ellipses: list[tuple[torch.Tensor, torch.Tensor, float, float]]
           ) -> torch.Tensor:
    """(1, 1, size, size) zeros with each (centre, radii, angle, value) ellipse painted over
    the image in turn, in row blocks of about 2^22 pixels."""
    image = torch.zeros(1, 1, size, size)
    coords = (torch.arange(size, dtype=torch.float32) + 0.5) / size
    block = max(1, 2**22 // size)
    for start in range(0, size, block):
        rows, dx = coords[start:start + block, None], coords[None, :]
        band = image[0, 0, start:start + block]
        for centre, radii, angle, value in ellipses:
            cos, sin = math.cos(angle), math.sin(angle)
            x, y = dx - centre[0], rows - centre[1]
            u, v = (x * cos + y * sin) / radii[0], (-x * sin + y * cos) / radii[1]
            band[u**2 + v**2 <= 1.0] = value
    return image


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
