"""Peak memory of one rank as a sum of terms, fitted to measured peaks.

peak = baseline + c_u * unknowns + c_m * measurements held + c_d * pixels per denoiser call
       + c_w * workspace elements

The terms are read off the experiment without building it: unknowns from the problem's image
shape, the measurements from a power law in the size parameter fitted to the calibration runs
(exact for the problems here: sinogram values grow as the detector, super-resolution's frames
as the image, the radio visibilities not at all), the denoiser's pixels from its tiling, the
workspace from the chunk rule of operators that work in chunks (the torch projector's chunk
grows with angles x N^2 up to a limit, then stays: a per-unknown term fitted below the limit
would keep growing above it). Each
coefficient is fitted by non-negative least squares, so a predicted peak never falls as the
size grows. With ``distribute_physics`` a rank holds its share of the operators' measurements,
with ``distribute_denoiser`` its share of the tiles.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

TERMS = ("process baseline", "per unknown", "per measurement", "per denoised pixel",
         "per workspace element")


@dataclass(frozen=True)
class Sizes:
    """The counts the terms multiply, for one rank of one experiment at one size."""

    unknowns: int
    measurements: float
    denoised: int
    workspace: int = 0  # elements of an operator's largest chunk (ProblemSpec.workspace)

    def features(self) -> tuple[float, ...]:
        return (1.0, float(self.unknowns), float(self.measurements), float(self.denoised),
                float(self.workspace))


@dataclass(frozen=True)
class CalibrationPoint:
    """One probe: the size parameter's value, the counts at it (one rank) and the peak."""

    size: int
    unknowns: int
    measurements: int
    denoised: int
    peak_bytes: int
    workspace: int = 0

    @property
    def sizes(self) -> Sizes:
        return Sizes(self.unknowns, self.measurements, self.denoised, self.workspace)


@dataclass(frozen=True)
class MemoryModel:
    """Bytes per unit of each term (``TERMS``), the measurement law (measurements = scale *
    size ** exponent on one rank holding every operator) and the points it was fitted to."""

    coefficients: tuple[float, ...]
    measurement_scale: float
    measurement_exponent: float
    points: tuple[CalibrationPoint, ...]

    def measurements(self, size: int) -> float:
        return self.measurement_scale * size ** self.measurement_exponent

    def terms(self, sizes: Sizes) -> dict[str, float]:
        """Each term's bytes at ``sizes``."""
        return {name: coefficient * value for name, coefficient, value
                in zip(TERMS, self.coefficients, sizes.features(), strict=True)}

    def predict(self, sizes: Sizes) -> float:
        return sum(self.terms(sizes).values())

    def dominant(self, sizes: Sizes) -> str:
        terms = self.terms(sizes)
        return max(terms, key=terms.get)

    @property
    def baseline_bytes(self) -> float:
        return self.coefficients[0]

    def to_json(self) -> dict:
        return {"coefficients": list(self.coefficients),
                "measurement_scale": self.measurement_scale,
                "measurement_exponent": self.measurement_exponent,
                "points": [asdict(point) for point in self.points]}

    @classmethod
    def from_json(cls, data: dict) -> MemoryModel:
        if len(data["coefficients"]) != len(TERMS):
            raise ValueError(f"a memory model has {len(TERMS)} coefficients")
        return cls(tuple(data["coefficients"]), data["measurement_scale"],
                   data["measurement_exponent"],
                   tuple(CalibrationPoint(**point) for point in data["points"]))


def measurement_law(points: list[CalibrationPoint]) -> tuple[float, float]:
    """(scale, exponent) of measurements = scale * size ** exponent, least squares in logs;
    (0, 0) when no probe held measurements (a denoiser run)."""
    import numpy as np

    held = [point for point in points if point.measurements > 0]
    if not held:
        return 0.0, 0.0
    sizes = np.log([point.size for point in held])
    counts = np.log([point.measurements for point in held])
    if np.ptp(sizes) == 0:
        return float(np.exp(counts.mean())), 0.0
    exponent, intercept = np.polyfit(sizes, counts, 1)
    return float(np.exp(intercept)), float(exponent)


def fit(points: list[CalibrationPoint]) -> MemoryModel:
    """Non-negative least squares of the peaks on the terms (columns scaled to unit maximum,
    an all-zero column left at zero)."""
    import numpy as np
    from scipy.optimize import nnls

    if len({point.size for point in points}) < 3:
        raise ValueError("a memory model needs probes at three sizes at least")
    design = np.array([point.sizes.features() for point in points])
    peaks = np.array([float(point.peak_bytes) for point in points])
    scale = design.max(axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(design / scale, peaks)
    coefficients = tuple(float(value) for value in solution / scale)
    return MemoryModel(coefficients, *measurement_law(points), tuple(points))


def operator_share(operators: int, ranks: int, distribute_physics: bool) -> float:
    """The fraction of the operators (and their measurements) one rank holds."""
    if not distribute_physics or ranks <= 1:
        return 1.0
    return math.ceil(operators / ranks) / operators
