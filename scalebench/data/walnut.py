"""The Walnut cone-beam CT data set: unpacking, pre-processing and the cached arrays.

Data set: Der Sarkissian et al., "A cone-beam X-ray CT data collection designed for machine
learning", Scientific Data 6, 215 (2019); one archive per walnut on Zenodo (CC BY 4.0). Its
layout, as the authors' reconstruction scripts read it:

    Walnut<N>/Projections/tubeV<orbit>/   orbit 1 (high), 2 (middle), 3 (low source position)
        scan_000000.tif ... scan_001200.tif   raw detector images (portrait read-out)
        di000000.tif                          dark field
        io000000.tif, io000001.tif            flat fields (before and after the scan)
        scan_geom_corrected.geom              1201 rows of 12 ASTRA cone_vec numbers (mm)
    Walnut<N>/Reconstructions/full_AGD_<iterations>_<slice:06>.tiff
        the reference volume: 501 slices of 501 x 501, voxels of 0.1 mm centred on the
        origin, from all three orbits and all views (50 iterations of non-negative
        accelerated gradient descent); attenuation per mm

Pre-processing follows the same scripts: view k of an orbit has geometry row k and image file
``scan_{views - k}`` (the images are stored in reverse order), each image is flipped upside
down and transposed into the geometry's (rows, cols) orientation, the dark field is
subtracted, the result divided by the mean flat field minus the dark, binned (mean over b x b
detector pixels) and turned into line integrals by -log. Binning b also scales the detector
pixel vectors by b and the volume's voxels by b (block means of the reference volume).

Prepared arrays are cached as .npy under ``<cache>/data/walnut/prepared/<key>/`` and reused.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalebench.errors import MissingFileError

NAME = "walnut"  # the manifest entry
WALNUT_ID = 1
VOXEL_SIZE_MM = 0.1  # the reference reconstruction's voxel side
MIN_TRANSMISSION = 1e-6  # floor before the log: dead or saturated pixels stay finite
ORBITS = (1, 2, 3)
FORMAT_VERSION = 2  # bump when the prepared arrays change meaning (2: dead pixels)


def data_folder(cache: Path) -> Path:
    return cache / "data" / NAME


def walnut_folder(cache: Path) -> Path:
    """The unpacked walnut (``Walnut1/``)."""
    return data_folder(cache) / f"Walnut{WALNUT_ID}"


def _unpacked_marker(cache: Path) -> Path:
    return data_folder(cache) / "unpacked.json"


def is_unpacked(cache: Path) -> bool:
    return _unpacked_marker(cache).is_file() and walnut_folder(cache).is_dir()


def not_fetched_message(cache: Path) -> str:
    """What to do when the walnut is not in ``cache``."""
    return (f"the walnut data set is not in the cache {cache}: run `scalebench fetch --data "
            f"{NAME}` (SCALEBENCH_CACHE sets the cache)")


def unpack(archive: Path, cache: Path) -> Path:
    """Extract the archive's ``Walnut1/`` into the cache atomically; check its layout."""
    target = walnut_folder(cache)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".unpack-") as staging:
        try:
            with zipfile.ZipFile(archive) as bundle:
                bundle.extractall(staging)
        except (zipfile.BadZipFile, OSError) as error:
            raise MissingFileError(f"{archive} is not a readable zip archive: {error}") from None
        extracted = Path(staging) / target.name
        check_layout(extracted)
        if target.exists():
            shutil.rmtree(target)
        os.replace(extracted, target)
    _unpacked_marker(cache).write_text(json.dumps({"archive": archive.name}) + "\n")
    return target


def check_layout(folder: Path) -> None:
    """Raise a one-line error unless ``folder`` has the data set's layout."""
    needed = [folder / "Projections" / f"tubeV{o}" / "scan_geom_corrected.geom" for o in ORBITS]
    missing = [str(p.relative_to(folder.parent)) for p in needed if not p.is_file()]
    if not list((folder / "Reconstructions").glob("full_AGD_*.tiff")):
        missing.append(f"{folder.name}/Reconstructions/full_AGD_*.tiff")
    if missing:
        raise MissingFileError(f"walnut archive lacks {', '.join(missing)} (not the Walnut "
                               f"data set's layout)")


@dataclass(frozen=True)
class PreparedWalnut:
    """Pre-processed projections of one orbit and the matching reference volume."""

    projections: np.ndarray  # (views, rows, cols) float32 line integrals
    vectors: np.ndarray  # (views, 12) cone_vec rows for the binned detector (mm)
    volume: np.ndarray  # (nz, ny, nx) float32 reference volume, attenuation per mm
    voxel_size: float  # mm
    shift: tuple[float, float, float]  # centre of the grid relative to the origin (x, y, z)


def view_indices(total: int, num_projections: int) -> np.ndarray:
    """``num_projections`` views spread evenly over the orbit's ``total``."""
    return np.unique(np.floor(np.arange(num_projections) * total / num_projections).astype(int))


def _read(path: Path) -> np.ndarray:
    import tifffile

    return tifffile.imread(path).astype(np.float32)


def _oriented(image: np.ndarray) -> np.ndarray:
    """Scanner read-out -> the geometry's (rows, cols) orientation."""
    return np.ascontiguousarray(np.flipud(image).T)


def _bin(image: np.ndarray, b: int) -> np.ndarray:
    rows, cols = (n // b * b for n in image.shape[-2:])
    cut = image[..., :rows, :cols]
    return cut.reshape(*cut.shape[:-2], rows // b, b, cols // b, b).mean(axis=(-3, -1))


def _binned_vectors(vectors: np.ndarray, detector: tuple[int, int], b: int) -> np.ndarray:
    """Geometry of the b x b binned detector (complete blocks from pixel (0, 0))."""
    rows, cols = detector
    kept_rows, kept_cols = rows // b * b, cols // b * b
    out = vectors.copy()
    # The kept pixels' centre moves when a remainder row or column is cut off.
    out[:, 3:6] += ((kept_cols - cols) / 2) * vectors[:, 6:9] \
        + ((kept_rows - rows) / 2) * vectors[:, 9:12]
    out[:, 6:12] *= b
    return out


def reference_slices(walnut: Path) -> list[Path]:
    return sorted((walnut / "Reconstructions").glob("full_AGD_*.tiff"))


def reference_shape(walnut: Path) -> tuple[int, int, int]:
    """Shape (nz, ny, nx) of the reference volume, read from its files' headers."""
    import tifffile

    slices = reference_slices(walnut)
    if not slices:
        raise MissingFileError(f"no reference reconstruction in {walnut / 'Reconstructions'}")
    with tifffile.TiffFile(slices[0]) as tiff:
        ny, nx = tiff.pages[0].shape
    return (len(slices), ny, nx)


def binned_volume_shape(walnut: Path, binning: int) -> tuple[int, int, int]:
    return tuple(n // binning for n in reference_shape(walnut))


def _reference(walnut: Path, b: int) -> tuple[np.ndarray, tuple[float, float, float]]:
    shape = reference_shape(walnut)
    kept = [n // b * b for n in shape]
    volume = np.stack([_read(p) for p in reference_slices(walnut)[:kept[0]]])
    volume = volume[:, :kept[1], :kept[2]]
    nz, ny, nx = (n // b for n in kept)
    volume = volume.reshape(nz, b, ny, b, nx, b).mean(axis=(1, 3, 5), dtype=np.float64)
    # Centre of the kept voxels relative to the full grid's centre, per axis (x, y, z).
    shift = tuple(((k - n) / 2) * VOXEL_SIZE_MM for k, n in zip(kept[::-1], shape[::-1],
                                                                   strict=True))
    return volume.astype(np.float32), shift


def _projections(orbit_folder: Path, views: np.ndarray, total: int, b: int) -> np.ndarray:
    dark = _oriented(_read(orbit_folder / "di000000.tif"))
    flat = np.mean([_oriented(_read(orbit_folder / f"io00000{i}.tif")) for i in (0, 1)], 0)
    out = []
    for k in views:
        image = _oriented(_read(orbit_folder / f"scan_{total - k:06d}.tif"))
        # A dead pixel (flat == dark) has no transmission: count it as fully transmitting
        # rather than let 0/0 spread NaN through its binned neighbours.
        transmission = np.divide(image - dark, flat - dark, out=np.ones_like(image),
                                 where=flat != dark)
        binned = _bin(transmission, b)
        out.append(-np.log(np.clip(binned, MIN_TRANSMISSION, None)))
    return np.stack(out).astype(np.float32)


def orbit_views(walnut: Path, orbit: int) -> int:
    """Views of one orbit of the unpacked walnut (its geometry file's rows but the last, which
    repeats the first angle), counted without reading any image."""
    geometry = walnut / "Projections" / f"tubeV{orbit}" / "scan_geom_corrected.geom"
    with open(geometry) as rows:  # the rows numpy.loadtxt reads: not blank, not '#' comments
        return sum(1 for row in rows if row.split("#", 1)[0].strip()) - 1


def check_views(total: int, orbit: int, num_projections: int) -> None:
    """Refuse more views than the orbit has (ValueError naming both)."""
    if num_projections > total:
        raise ValueError(f"num_projections ({num_projections}) exceeds the {total} views of "
                         f"orbit {orbit} of the fetched scan")


def _key(orbit: int, binning: int, num_projections: int) -> str:
    return f"v{FORMAT_VERSION}-orbit{orbit}-bin{binning}-views{num_projections}"


def prepare(cache: Path, orbit: int, binning: int, num_projections: int) -> Path:
    """Pre-process the unpacked walnut for these parameters (once); the cached folder."""
    folder = data_folder(cache) / "prepared" / _key(orbit, binning, num_projections)
    if (folder / "info.json").is_file():
        return folder
    walnut = walnut_folder(cache)
    if not is_unpacked(cache):
        raise MissingFileError(not_fetched_message(cache))
    orbit_folder = walnut / "Projections" / f"tubeV{orbit}"
    vectors = np.loadtxt(orbit_folder / "scan_geom_corrected.geom", ndmin=2)
    total = orbit_views(walnut, orbit)  # what validate and plan count
    check_views(total, orbit, num_projections)
    views = view_indices(total, num_projections)
    projections = _projections(orbit_folder, views, total, binning)
    detector = _oriented(_read(orbit_folder / "di000000.tif")).shape
    volume, shift = _reference(walnut, binning)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".prepare-") as staging:
        staged = Path(staging) / "arrays"
        staged.mkdir()
        np.save(staged / "projections.npy", projections)
        np.save(staged / "vectors.npy", _binned_vectors(vectors[views], detector, binning))
        np.save(staged / "volume.npy", volume)
        info = {"orbit": orbit, "binning": binning, "num_projections": num_projections,
                "views": views.tolist(), "voxel_size": VOXEL_SIZE_MM * binning,
                "shift": list(shift), "format": FORMAT_VERSION}
        (staged / "info.json").write_text(json.dumps(info) + "\n")
        if folder.exists() and not (folder / "info.json").is_file():
            shutil.rmtree(folder)  # left incomplete by an older version
        try:
            os.replace(staged, folder)
        except OSError:
            # Another process (rank) prepared the same arrays first: keep theirs.
            if not (folder / "info.json").is_file():
                raise
    return folder


def load_prepared(folder: Path) -> PreparedWalnut:
    """The arrays of a prepared folder; a one-line error when they are unreadable."""
    try:
        info = json.loads((folder / "info.json").read_text())
        arrays = {name: np.load(folder / f"{name}.npy")
                  for name in ("projections", "vectors", "volume")}
        return PreparedWalnut(arrays["projections"], arrays["vectors"], arrays["volume"],
                              float(info["voxel_size"]), tuple(info["shift"]))
    # An empty .npy ends early (EOFError); an edited info.json may lack or mistype a key.
    except (OSError, ValueError, EOFError, KeyError, TypeError) as error:
        raise MissingFileError(f"prepared walnut arrays in {folder} are unreadable "
                               f"({type(error).__name__}: {error}): delete that folder, or "
                               f"run `scalebench fetch --data {NAME}`") from None
