"""A miniature walnut in the Walnut data set's file layout, made by the tests (no network).

An object of two ellipsoids (a shell and a kernel inside it) is scanned on three circular
orbits: its exact line integrals (analytic chord lengths) become detector counts through a
flat and a dark field, written as 16-bit TIFFs in the scanner's read-out orientation with the
geometry files, and its voxelised attenuation is written as the reference reconstruction.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import tifffile

from scalebench.physics.conebeam import circular_vectors

SIZE = 32  # reference volume: SIZE^3 voxels of 0.1 mm
VIEWS = 16  # per orbit (the geometry file has one more row, repeating the first angle)
# Views per orbit of the larger fixture: twice walnut_conebeam's default num_projections (60),
# as many as any shipped config names (the real scan has 1200; 10 times the files cost 10 s).
MANY_VIEWS = 120
DETECTOR = (32, 32)  # rows, cols
PIXEL_MM = 0.3
SOURCE_MM, DETECTOR_MM = 6.6, 13.3
ORBIT_HEIGHT_MM = {1: 0.4, 2: 0.0, 3: -0.4}
FLAT, DARK = 20000.0, 500.0
# (centre xyz mm, semi-axes xyz mm, attenuation per mm), added up: a body, a kernel and an
# off-centre dense spot, so that no rotation or flip of the data maps the object onto itself.
ELLIPSOIDS = [((0.0, 0.0, 0.0), (1.3, 1.2, 1.1), 0.6),
              ((0.1, -0.1, 0.05), (0.7, 0.6, 0.5), 0.5),
              ((0.7, 0.35, 0.4), (0.3, 0.25, 0.35), 2.0)]


def orbit_vectors(orbit: int, views: int = VIEWS) -> np.ndarray:
    vectors = circular_vectors(views, SOURCE_MM, DETECTOR_MM, PIXEL_MM)
    vectors[:, 2] += ORBIT_HEIGHT_MM[orbit]
    vectors[:, 5] += ORBIT_HEIGHT_MM[orbit]
    return np.concatenate([vectors, vectors[:1]])


def pixel_rays(vectors: np.ndarray, detector: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Sources (views, 1, 1, 3) and unit directions (views, rows, cols, 3) of every pixel."""
    rows, cols = detector
    r = np.arange(rows) - (rows - 1) / 2
    c = np.arange(cols) - (cols - 1) / 2
    source = vectors[:, None, None, 0:3]
    target = vectors[:, None, None, 3:6] + c[None, None, :, None] * vectors[:, None, None, 6:9] \
        + r[None, :, None, None] * vectors[:, None, None, 9:12]
    direction = target - source
    return source, direction / np.linalg.norm(direction, axis=-1, keepdims=True)


def ellipsoid_chords(vectors: np.ndarray, detector: tuple[int, int], centre, axes) -> np.ndarray:
    """Exact chord lengths (mm) of every pixel's ray through an axis-aligned ellipsoid."""
    source, direction = pixel_rays(vectors, detector)
    axes = np.asarray(axes, dtype=float)
    q0 = (source - np.asarray(centre)) / axes
    q1 = direction / axes
    a = (q1 ** 2).sum(-1)
    b = 2 * (q0 * q1).sum(-1)
    c = (q0 ** 2).sum(-1) - 1
    disc = np.clip(b ** 2 - 4 * a * c, 0, None)
    return np.sqrt(disc) / a


def line_integrals(vectors: np.ndarray, detector: tuple[int, int] = DETECTOR) -> np.ndarray:
    return sum(mu * ellipsoid_chords(vectors, detector, centre, axes)
               for centre, axes, mu in ELLIPSOIDS)


def reference_volume(size: int = SIZE, supersample: int = 3) -> np.ndarray:
    """Voxelised attenuation (z, y, x), voxels of 0.1 mm centred on the origin."""
    fine = size * supersample
    axis = ((np.arange(fine) + 0.5) / supersample - size / 2) * 0.1
    z, y, x = np.meshgrid(axis, axis, axis, indexing="ij")
    volume = np.zeros_like(x)
    for centre, axes, mu in ELLIPSOIDS:
        terms = zip((x, y, z), centre, axes, strict=True)
        inside = sum(((p - c) / a) ** 2 for p, c, a in terms) <= 1
        volume += mu * inside
    s = supersample
    return volume.reshape(size, s, size, s, size, s).mean(axis=(1, 3, 5)).astype(np.float32)


def _readout(image: np.ndarray) -> np.ndarray:
    """The geometry's (rows, cols) orientation -> the scanner's stored orientation."""
    return np.flipud(image.T)


def write_walnut(root: Path, seed: int = 0, views: int = VIEWS) -> Path:
    """Write ``root/Walnut1/`` in the data set's layout with ``views`` views per orbit (the
    real scan has 1200); return that folder."""
    rng = np.random.default_rng(seed)
    walnut = root / "Walnut1"
    for orbit in (1, 2, 3):
        folder = walnut / "Projections" / f"tubeV{orbit}"
        folder.mkdir(parents=True)
        vectors = orbit_vectors(orbit, views)
        np.savetxt(folder / "scan_geom_corrected.geom", vectors)
        flat = FLAT * (1 + 0.05 * np.linspace(-1, 1, DETECTOR[1]))[None, :] \
            * np.ones(DETECTOR)
        tifffile.imwrite(folder / "di000000.tif", _readout(np.full(DETECTOR, DARK))
                         .astype(np.uint16))
        for i in (0, 1):
            tifffile.imwrite(folder / f"io00000{i}.tif", _readout(flat).astype(np.uint16))
        counts = DARK + (flat - DARK) * np.exp(-line_integrals(vectors[:views]))
        counts += rng.normal(0, 20, counts.shape)
        # View k is stored as scan_{views - k}; scan_000000 repeats view 0's angle.
        for k in range(views + 1):
            image = counts[(views - k) % views]
            tifffile.imwrite(folder / f"scan_{k:06d}.tif",
                             _readout(np.clip(np.rint(image), 0, 65535)).astype(np.uint16))
    recon = walnut / "Reconstructions"
    recon.mkdir(parents=True)
    for i, plane in enumerate(reference_volume()):
        tifffile.imwrite(recon / f"full_AGD_50_{i:06d}.tiff", plane)
    return walnut


def zip_walnut(walnut: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(walnut.rglob("*")):
            bundle.write(path, path.relative_to(walnut.parent))
    return archive


def walnut_cache(cache: Path, views: int = VIEWS) -> Path:
    """A scalebench cache holding the miniature walnut (``views`` views per orbit), unpacked
    as `scalebench fetch` does."""
    from scalebench.data import walnut

    source = cache / "fixture-source"
    archive = zip_walnut(write_walnut(source, views=views), cache / "Walnut1.zip")
    walnut.unpack(archive, cache)
    archive.unlink()
    return cache
