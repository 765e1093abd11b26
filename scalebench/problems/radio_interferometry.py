"""Radio interferometry: a high-dynamic-range sky seen through MeerKAT's simulated uv coverage.

Observation (Earth-rotation synthesis, Thompson, Moran & Swenson, "Interferometry and
Synthesis in Radio Astronomy", ch. 4). Antenna positions (east E, north N, up U, metres, from
the data file shipped with this package) become equatorial coordinates at latitude phi:

    X = -sin(phi) N + cos(phi) U,   Y = E,   Z = cos(phi) N + sin(phi) U

Each of the n(n-1)/2 antenna pairs i < j gives a baseline (X, Y, Z)_j - (X, Y, Z)_i, which a
source at declination delta and hour angle H sees as

    u = sin(H) X + cos(H) Y
    v = -sin(delta) cos(H) X + sin(delta) sin(H) Y + cos(delta) Z
    w = cos(delta) cos(H) X - cos(delta) sin(H) Y + sin(delta) Z

in metres; divided by the wavelength c / f of each channel they are in wavelengths. Hour
angles are the centres of ``num_times`` equal intervals of [hour_angle_start,
hour_angle_end]; channels the centres of ``num_channels`` equal parts of the band. The field
is narrow (pixel size ``1 / (pixels_per_beam * max |(u, v)|)`` radians), so w is neglected.
Visibilities are ordered (time, channel, baseline); operator k holds the time steps
k, k + K, ... (all channels), so ranks can split the physics by time.

Weights (``natural``: equal; ``uniform``: inverse of the number of visibilities, conjugates
included, in the visibility's cell of the N x N Fourier grid) are scaled to sum to one over
the whole observation: A^T A then responds with 1 to a unit point source at the phase
centre, A^T y is the dirty image in units of the sky per beam, and the solvers' ``dirty``
initial estimate returns it.

Sky: generated from ``seed`` at the image size (point sources with fluxes log-uniform over
``dynamic_range``, the brightest at 1; elliptical Gaussian components; faint diffuse emission)
(the family IMAGES: sky-<n> is the sky of seed n, with the default ``dynamic_range``)
or read from the FITS image at ``sky_fits`` (first image HDU, first plane of any extra axes,
NaN blanks set to 0, central square resampled to the image size). ``dynamic_range`` is also
the range the asinh-PSNR covers (its softening is the peak over it,
scalebench.rank.metrics), for a FITS sky too.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scalebench.param_spec import Param
from scalebench.physics.backends import BACKENDS, check_installed
from scalebench.problems.images import ImageFamily
from scalebench.problems.spec import AdjointCase, ProblemSpec

if TYPE_CHECKING:
    import torch

    from scalebench.physics.radio import VisibilityOperator
    from scalebench.problems.base import ProblemSetup

ANTENNA_FILE = "meerkat_antennas.csv"
LATITUDE_DEG = -(30 + 42 / 60 + 39.8 / 3600)  # MeerKAT's array reference position
SPEED_OF_LIGHT = 299_792_458.0  # m/s
WEIGHTINGS = ("natural", "uniform")

PARAMS = {
    "image_size": Param(128, int, minimum=32, doc="side of the square sky image, in pixels "
                                                 "(even)"),
    "pixels_per_beam": Param(3.0, float, minimum=2.0, doc="pixels across the synthesised "
                                                        "beam 1/max|uv| (2: Nyquist)"),
    "declination_deg": Param(-30.0, float, minimum=-90.0, maximum=90.0,
                             doc="declination of the pointing centre, degrees"),
    "hour_angle_start": Param(-4.0, float, minimum=-12.0, maximum=12.0,
                              doc="first hour angle of the track, hours"),
    "hour_angle_end": Param(4.0, float, minimum=-12.0, maximum=12.0,
                            doc="last hour angle of the track, hours"),
    "num_times": Param(32, int, minimum=1, doc="time steps (integrations) of the track"),
    "frequency_mhz": Param(1284.0, float, minimum=1.0, doc="centre of the band, MHz"),
    "bandwidth_mhz": Param(856.0, float, minimum=0.0, doc="width of the band, MHz"),
    "num_channels": Param(4, int, minimum=1, doc="frequency channels across the band"),
    "weighting": Param("natural", str, choices=WEIGHTINGS, doc="visibility weighting"),
    "backend": Param("auto", str, choices=BACKENDS, doc="library of the visibility "
                                                        "transform (auto: fastest accurate)"),
    "dynamic_range": Param(1e4, float, minimum=1.0, doc="brightest / faintest point source "
                           "(also the asinh-PSNR's range)"),
    "sky_fits": Param(None, str, nullable=True, doc="FITS sky image; null: generated sky"),
    "num_operators": Param(1, int, minimum=1, doc="groups the time steps are split into"),
    "noise_level": Param(0.01, float, minimum=0.0, doc="noise std relative to RMS(A x)"),
    "seed": Param(0, int, minimum=0, doc="seed of the generated sky and of the noise"),
}


def antenna_positions() -> np.ndarray:
    """(64, 3) east, north, up positions of MeerKAT's dishes in metres (package data)."""
    text = resources.files("scalebench.data").joinpath("telescopes", ANTENNA_FILE).read_text()
    rows = [line.split(",") for line in text.splitlines()
            if line and not line.startswith("#")][1:]
    return np.array([[float(value) for value in row[1:4]] for row in rows])


def equatorial_baselines(enu: np.ndarray, latitude_deg: float = LATITUDE_DEG) -> np.ndarray:
    """(n(n-1)/2, 3) baselines X, Y, Z in metres of every antenna pair i < j."""
    phi = math.radians(latitude_deg)
    east, north, up = enu.T
    xyz = np.stack([-math.sin(phi) * north + math.cos(phi) * up, east,
                    math.cos(phi) * north + math.sin(phi) * up], axis=1)
    first, second = np.triu_indices(len(enu), k=1)
    return xyz[second] - xyz[first]


def baseline_uvw(baselines: np.ndarray, hour_angles: np.ndarray,
                 declination: float) -> np.ndarray:
    """(T, B, 3) u, v, w in metres of each baseline at each hour angle (radians)."""
    x, y, z = baselines.T
    h = hour_angles[:, None]
    sin_d, cos_d = math.sin(declination), math.cos(declination)
    u = np.sin(h) * x + np.cos(h) * y
    v = -sin_d * np.cos(h) * x + sin_d * np.sin(h) * y + cos_d * z
    w = cos_d * np.cos(h) * x - cos_d * np.sin(h) * y + sin_d * z
    return np.stack([u, v, w], axis=-1)


def interval_centres(start: float, end: float, count: int) -> np.ndarray:
    """Centres of ``count`` equal parts of [start, end]."""
    return start + (np.arange(count) + 0.5) * (end - start) / count


def hour_angles_rad(hour_angle_start: float, hour_angle_end: float, num_times: int,
                    **_) -> np.ndarray:
    return interval_centres(hour_angle_start, hour_angle_end, num_times) * (math.pi / 12)


def channel_frequencies_hz(frequency_mhz: float, bandwidth_mhz: float, num_channels: int,
                           **_) -> np.ndarray:
    return 1e6 * interval_centres(frequency_mhz - bandwidth_mhz / 2,
                                  frequency_mhz + bandwidth_mhz / 2, num_channels)


def observation_uv(params: dict) -> np.ndarray:
    """(T, C, B, 2) u, v in wavelengths of every visibility of the observation."""
    baselines = equatorial_baselines(antenna_positions())
    uvw = baseline_uvw(baselines, hour_angles_rad(**params),
                       math.radians(params["declination_deg"]))
    wavelengths = SPEED_OF_LIGHT / channel_frequencies_hz(**params)
    return uvw[:, None, :, :2] / wavelengths[None, :, None, None]


def lowest_elevation_deg(declination_deg: float, hour_angles: np.ndarray) -> float:
    """Lowest elevation of the pointing centre over the track, seen from MeerKAT."""
    phi, delta = math.radians(LATITUDE_DEG), math.radians(declination_deg)
    sines = math.sin(phi) * math.sin(delta) + math.cos(phi) * math.cos(delta) * np.cos(
        hour_angles)
    return math.degrees(math.asin(float(np.clip(sines.min(), -1, 1))))


def visibility_weights(uv_pixels: np.ndarray, image_size: int, weighting: str) -> np.ndarray:
    """Natural (equal) or uniform weights of (M, 2) uv points in cycles per pixel; sum 1."""
    if weighting == "natural":
        weights = np.ones(len(uv_pixels))
    else:
        cells = np.floor(uv_pixels * image_size).astype(np.int64) % image_size
        conjugates = np.floor(-uv_pixels * image_size).astype(np.int64) % image_size
        flat = cells[:, 1] * image_size + cells[:, 0]
        flat_conjugates = conjugates[:, 1] * image_size + conjugates[:, 0]
        density = np.bincount(np.concatenate([flat, flat_conjugates]),
                              minlength=image_size * image_size)
        weights = 1.0 / density[flat]
    return weights / weights.sum()


def generated_sky(image_size: int, seed: int, dynamic_range: float) -> torch.Tensor:
    """(1, 1, N, N) non-negative sky: point sources, Gaussian components, diffuse emission."""
    import torch

    rng = np.random.default_rng(seed)
    n = image_size
    sky = 1e-3 * _diffuse_emission(rng, n)
    for _ in range(3 + n // 64):
        _add_gaussian(sky, rng, amplitude=math.exp(rng.uniform(math.log(1e-3), math.log(3e-2))))
    count = max(8, n * n // 512)
    margin = max(1, n // 16)
    rows, cols = (rng.integers(margin, n - margin, count) for _ in range(2))
    fluxes = np.exp(rng.uniform(-math.log(dynamic_range), 0.0, count))
    fluxes[0] = 1.0  # the brightest source sets the peak
    np.add.at(sky, (rows, cols), fluxes)
    return torch.from_numpy(sky.astype(np.float32))[None, None]


def _diffuse_emission(rng: np.random.Generator, n: int) -> np.ndarray:
    """Smooth positive emission (a log-normal field under a broad envelope), peak 1."""
    import torch
    import torch.nn.functional as F

    coarse = torch.from_numpy(rng.standard_normal((1, 1, 8, 8)))
    field = F.interpolate(coarse, size=(n, n), mode="bicubic", align_corners=True)[0, 0]
    axis = (np.arange(n) - n / 2) / (n / 4)
    envelope = np.exp(-(axis[:, None] ** 2 + axis[None, :] ** 2) / 2)
    emission = np.exp(field.numpy()) * envelope
    return emission / emission.max()


def _add_gaussian(sky: np.ndarray, rng: np.random.Generator, amplitude: float) -> None:
    """Add an elliptical Gaussian component, evaluated within 4 sigma of its centre."""
    n = sky.shape[0]
    major = rng.uniform(max(1.5, n / 64), max(2.0, n / 10))
    minor = major * rng.uniform(0.3, 1.0)
    angle = rng.uniform(0, math.pi)
    centre = rng.uniform(n / 8, 7 * n / 8, 2)
    reach = int(4 * major) + 1
    low = np.maximum(0, centre.astype(int) - reach)
    high = np.minimum(n, centre.astype(int) + reach + 1)
    rows, cols = np.meshgrid(np.arange(low[0], high[0]) - centre[0],
                             np.arange(low[1], high[1]) - centre[1], indexing="ij")
    along = cols * math.cos(angle) + rows * math.sin(angle)
    across = -cols * math.sin(angle) + rows * math.cos(angle)
    sky[low[0]:high[0], low[1]:high[1]] += amplitude * np.exp(
        -(along**2 / major**2 + across**2 / minor**2) / 2)


def fits_sky(path: str, image_size: int) -> torch.Tensor:
    """(1, 1, N, N) sky from a FITS image: central square resampled to ``image_size``."""
    import torch
    import torch.nn.functional as F

    try:
        from astropy.io import fits
    except ImportError:
        raise ValueError("sky_fits needs astropy: pip install 'scalebench[radio]'") from None
    try:
        with fits.open(path) as hdus:
            planes = [hdu.data for hdu in hdus if hdu.data is not None and hdu.data.ndim >= 2]
            if not planes:
                raise ValueError(f"sky_fits: {path} holds no image (no HDU with 2 or more "
                                 f"axes)")
            data = np.asarray(planes[0][(0,) * (planes[0].ndim - 2)], dtype=np.float64)
    except OSError as error:  # missing, unreadable, empty or not FITS
        raise ValueError(f"sky_fits: {path} is not a readable FITS file "
                         f"({str(error).splitlines()[0] if str(error) else error})") from None
    data = np.nan_to_num(data, nan=0.0, posinf=0.0, neginf=0.0)
    side = min(data.shape)
    top, left = (data.shape[0] - side) // 2, (data.shape[1] - side) // 2
    square = torch.from_numpy(data[top:top + side, left:left + side].copy())[None, None]
    if side != image_size:
        mode = "area" if side > image_size else "bicubic"
        square = F.interpolate(square, size=(image_size, image_size), mode=mode)
    return square.float()


def image_shape(image_size: int, num_times: int, num_operators: int, hour_angle_start: float,
                hour_angle_end: float, declination_deg: float, sky_fits: str | None,
                backend: str, **_) -> tuple[int, ...]:
    check_installed(backend)
    if image_size % 2:
        raise ValueError(f"image_size must be even, got {image_size}")
    if num_operators > num_times:
        raise ValueError(f"num_operators ({num_operators}) must not exceed num_times "
                         f"({num_times})")
    if hour_angle_end <= hour_angle_start:
        raise ValueError(f"hour_angle_end ({hour_angle_end}) must exceed hour_angle_start "
                         f"({hour_angle_start})")
    lowest = lowest_elevation_deg(declination_deg, hour_angles_rad(
        hour_angle_start, hour_angle_end, num_times))
    if lowest <= 0:
        raise ValueError(f"the pointing centre (declination {declination_deg} deg) is below "
                         f"MeerKAT's horizon during the track (elevation {lowest:.1f} deg); "
                         f"narrow the hour-angle range")
    if sky_fits is not None and not Path(sky_fits).is_file():
        raise ValueError(f"sky_fits: no such file: {sky_fits}")
    return (1, image_size, image_size)


def operator_count(num_operators: int, **_) -> int:
    return num_operators


def setup(**params) -> ProblemSetup:
    import torch

    from scalebench.physics.radio import VisibilityOperator
    from scalebench.problems.base import ProblemSetup

    image_shape(**params)
    size, num_operators = params["image_size"], params["num_operators"]
    uv = observation_uv(params)  # (T, C, B, 2) wavelengths
    cell = 1.0 / (params["pixels_per_beam"] * np.linalg.norm(uv, axis=-1).max())
    uv_pixels = uv * cell
    weights = visibility_weights(uv_pixels.reshape(-1, 2), size, params["weighting"])
    weights = weights.reshape(uv.shape[:-1])
    if params["sky_fits"] is None:
        sky = generated_sky(size, params["seed"], params["dynamic_range"])
    else:
        sky = fits_sky(params["sky_fits"], size)

    def make_operator(k: int) -> VisibilityOperator:
        times = slice(k, None, num_operators)
        return VisibilityOperator(torch.from_numpy(uv_pixels[times].reshape(-1, 2)),
                                  torch.from_numpy(weights[times].reshape(-1)), size,
                                  params["backend"])

    return ProblemSetup("radio_interferometry", sky, num_operators, make_operator,
                        params["noise_level"], params["seed"],
                        metric_dynamic_range=params["dynamic_range"])


def draw_sky(name: str, size: int) -> torch.Tensor:
    """The generated sky called ``name`` (sky-<n>), at the default dynamic range."""
    return generated_sky(size, IMAGES.seed(name), PARAMS["dynamic_range"].default)


# The skies are the seeds' (the seed draws the sky and the noise together): a name sets
# ``seed``, so the family adds no parameter and runs keep their hashes.
IMAGES = ImageFamily(
    parameter="seed", default="sky-0", named=(), seeded="sky",
    validation=("sky-101", "sky-102"), test=("sky-0", "sky-1", "sky-2", "sky-3"),
    channels=1, draw=draw_sky, replaced_by="sky_fits",
    description="generated skies: `sky-<n>` is the sky (and the noise) of seed n")


SPEC = ProblemSpec("radio_interferometry", PARAMS, setup, image_shape, operator_count,
                   "MeerKAT radio interferometry of a high-dynamic-range sky",
                   # the transform library was called 'operator', which names A_k elsewhere
                   renamed={"operator": "backend"},
                   work_parameters={"num_times": 1, "num_channels": 1, "image_size": 2},
                   # Radio skies are mostly dark: a blank image has a high PSNR, SSIM and
                   # asinh-PSNR there, but an SNR of exactly 0 dB.
                   headline=("objective_snr_db", "SNR"), images=IMAGES,
                   adjoint_cases=tuple(
                       AdjointCase(dict(image_size=32, num_times=4, num_channels=2,
                                        num_operators=2, backend=library))
                       for library in ("ducc0", "finufft", "torchkbnufft", "dft")))
