"""Peak memory of one rank: the larger of its set-up's peak and its iterations' peak, each a
sum of terms fitted to measured peaks.

phase peak = baseline + c_u * unknowns + c_m * measurements held + c_d * pixels per denoiser
             call + c_w * workspace elements
peak = max(set-up peak, iterations' peak)

A run's peak is the larger of two phases, not a sum: the set-up (data, operators, operator
norm, initial estimate) frees its temporaries and hands them back when it ends
(rank.profiling.release_freed_memory), and the iterations then allocate their own. Fitted
as one sum, a problem whose set-up dominates at small sizes (radio: its visibilities) shows
no growth there, and its iterations' growth at large sizes is missed. Each phase is fitted on
its own probes' peaks.

The terms are read off the experiment without building it: unknowns from the problem's image
shape, the measurements from a power law in the size parameter fitted to the calibration runs
(exact for the problems here: sinogram values grow as the detector, super-resolution's frames
as the image, the radio visibilities not at all), the denoiser's pixels from its tiling, the
workspace from the chunk rule of operators that work in chunks (the torch projector's chunk
grows with angles x N^2 up to a limit, then stays: a per-unknown term fitted below the limit
would keep growing above it). Each coefficient is fitted by non-negative least squares, so a
predicted peak never falls as the size grows. A phase whose fitted growth over the probes is
within their noise is held at its largest probed peak: its slope would be the noise's.
With ``distribute_physics`` a rank holds its share of the operators' measurements, with
``distribute_denoiser`` its share of the tiles.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

TERMS = ("process baseline", "per unknown", "per measurement", "per denoised pixel",
         "per workspace element")
PHASES = ("set-up", "iterations")
# A fit that grows by less than this over its probes learns nothing about the size: the
# probes' peaks differ by their run-to-run noise (up to about 10 MiB, measured), as radio's do
# up to 512 and TV's below 128.
GROWTH_FLOOR_BYTES = 8 * 2**20
# ... nor one whose growth is within this many times the spread of its probes about the fit
# (the root mean square of the residuals): radio's set-up peaks scatter by 15 MiB at every
# size, and a line through them extrapolates that scatter to large sizes. Pure noise fitted
# by a line over four evenly spread probes grows by 1.3 times its spread on average.
GROWTH_NOISE_RATIO = 4.0


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
    """One probe: the size parameter's value, the counts at it (one rank) and the peaks of its
    phases (``PHASES``: set-up, iterations)."""

    size: int
    unknowns: int
    measurements: int
    denoised: int
    phase_peaks_bytes: tuple[int, int]
    workspace: int = 0
    # The iterations' own peak is unknown, only at most the set-up's: the system let the probe
    # reset no host peak, and the iterations did not raise the process's lifetime peak.
    iterations_peak_bounded: bool = False
    # What the probe's run took (probe.ProbeResult.timing; the time model's input, and
    # cached with the peaks): empty for a probe made before runs were timed.
    timing: dict = field(default_factory=dict, compare=False, hash=False)
    # The algorithm whose probe this is, where the calibration borrowed it from a configuration
    # of its family (configuration.family_key); empty: the configuration's own probe.
    shared_from: str = ""

    @property
    def sizes(self) -> Sizes:
        return Sizes(self.unknowns, self.measurements, self.denoised, self.workspace)

    @property
    def peak_bytes(self) -> int:
        """The run's peak: the larger phase's."""
        return max(self.phase_peaks_bytes)


@dataclass(frozen=True)
class MemoryModel:
    """Bytes per unit of each term (``TERMS``) for each phase (``PHASES``), the measurement
    law (measurements = scale * size ** exponent on one rank holding every operator) and the
    points it was fitted to."""

    phase_coefficients: tuple[tuple[float, ...], tuple[float, ...]]
    measurement_scale: float
    measurement_exponent: float
    points: tuple[CalibrationPoint, ...]
    # Wall time of the probes that made it (calibration.calibrate, refine.refined): what a
    # cached answer says its calibration took.
    seconds: float = 0.0

    def measurements(self, size: int) -> float:
        return self.measurement_scale * size ** self.measurement_exponent

    def phase_terms(self, phase: str, sizes: Sizes) -> dict[str, float]:
        """Each term's bytes at ``sizes`` in ``phase``."""
        coefficients = self.phase_coefficients[PHASES.index(phase)]
        return {name: coefficient * value for name, coefficient, value
                in zip(TERMS, coefficients, sizes.features(), strict=True)}

    def phase_peaks(self, sizes: Sizes) -> dict[str, float]:
        return {phase: sum(self.phase_terms(phase, sizes).values()) for phase in PHASES}

    def dominant_phase(self, sizes: Sizes) -> str:
        """The phase whose peak is the run's."""
        peaks = self.phase_peaks(sizes)
        return max(PHASES, key=peaks.get)

    def terms(self, sizes: Sizes) -> dict[str, float]:
        """Each term's bytes at ``sizes`` in the phase that sets the peak."""
        return self.phase_terms(self.dominant_phase(sizes), sizes)

    def predict(self, sizes: Sizes) -> float:
        return max(self.phase_peaks(sizes).values())

    def dominant(self, sizes: Sizes) -> str:
        """The largest term of the phase that sets the peak."""
        terms = self.terms(sizes)
        return max(terms, key=terms.get)

    @property
    def grows(self) -> bool:
        """Whether a phase's peak grows with the size: ``fit_phase`` keeps size terms only
        where the probes' peaks grow by more than their noise. A model whose every phase is
        held flat would call nearly every size fitting; one growing phase is enough (radio's
        iterations, growing below a flat set-up, pass it at a larger size)."""
        return any(any(coefficients[1:]) for coefficients in self.phase_coefficients)

    @property
    def approximate(self) -> bool:
        """Whether the iterations' terms were fitted to peaks only bounded by the set-up's
        (``iterations_points``): their growth past the probes is then not known."""
        return any(point.iterations_peak_bounded for point in iterations_points(self.points))

    @property
    def baseline_bytes(self) -> float:
        """The peak as the size goes to nothing: the larger phase baseline."""
        return max(coefficients[0] for coefficients in self.phase_coefficients)

    @property
    def floor_bytes(self) -> float:
        """The process's own peak as measured: the baseline, or the smallest probe's peak where
        that is lower. A fit weighted to probes near a large answer draws a line whose
        intercept lies above every small probe (TV: 1010 MiB against 905 MiB measured at 16²),
        and a headroom taken above that intercept shrinks to nothing near it."""
        smallest = min(self.points, key=lambda point: point.unknowns, default=None)
        return self.baseline_bytes if smallest is None else \
            min(self.baseline_bytes, float(smallest.peak_bytes))

    def to_json(self) -> dict:
        return {"phase_coefficients": dict(zip(PHASES, map(list, self.phase_coefficients),
                                               strict=True)),
                "measurement_scale": self.measurement_scale,
                "measurement_exponent": self.measurement_exponent,
                "points": [asdict(point) for point in self.points], "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: dict) -> MemoryModel:
        phases = data["phase_coefficients"]
        if set(phases) != set(PHASES) or any(len(phases[phase]) != len(TERMS)
                                             for phase in PHASES):
            raise ValueError(f"a memory model has {len(TERMS)} coefficients per phase "
                             f"({', '.join(PHASES)})")
        points = tuple(point_from_json(point) for point in data["points"])
        return cls(tuple(tuple(phases[phase]) for phase in PHASES), data["measurement_scale"],
                   data["measurement_exponent"], points, float(data.get("seconds", 0.0)))


def point_from_json(data: dict) -> CalibrationPoint:
    """A probe as ``asdict`` wrote it (a cache entry, a time record)."""
    return CalibrationPoint(**{**data, "phase_peaks_bytes": tuple(data["phase_peaks_bytes"])})


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


def fit(points: list[CalibrationPoint], weighted: bool = False,
        ignored: frozenset[int] = frozenset()) -> MemoryModel:
    """Each phase's coefficients fitted to its peaks (``fit_phase``). ``weighted``: each
    probe's squared residual counts in proportion to its unknowns (``unknowns_weights``), so
    that the probes nearest a large answer decide the fit (refine.refined). The probes at
    ``ignored`` sizes stay among the model's points but count for nothing in the fit."""
    if len({point.size for point in points if point.size not in ignored}) < 3:
        raise ValueError("a memory model needs probes at three sizes at least")

    def weights(phase_points: list[CalibrationPoint]) -> list[float] | None:
        if not weighted and not ignored:
            return None
        base = unknowns_weights(phase_points) if weighted else [1.0] * len(phase_points)
        return [0.0 if point.size in ignored else value
                for point, value in zip(phase_points, base, strict=True)]

    coefficients = tuple(
        fit_phase([point.sizes.features() for point in phase_points],
                  [point.phase_peaks_bytes[index] for point in phase_points],
                  weights(phase_points))
        for index, phase_points in enumerate((points, iterations_points(points))))
    return MemoryModel(coefficients, *measurement_law(points), tuple(points))


def unknowns_weights(points: list[CalibrationPoint]) -> list[float]:
    """Each probe's unknowns over the largest probe's. The peak per unknown changes with the
    size (glibc's heap below its mmap threshold, mapped blocks above it: 205 bytes per
    unknown up to 1024² for CT, 55 at 3307²), so a line fitted evenly to probes 15-240x
    smaller than the answer carries the small sizes' regime to it (1.4-1.9x high); weighted
    by their unknowns, the small probes only anchor the line the large ones draw."""
    largest = max(point.unknowns for point in points)
    return [point.unknowns / largest if largest else 1.0 for point in points]


def iterations_points(points: list[CalibrationPoint] | tuple[CalibrationPoint, ...]
                      ) -> list[CalibrationPoint]:
    """The probes the iterations' terms are fitted to: those whose iterations peak is their
    own when they cover three sizes (at the others the set-up's peak is the run's), else
    all of them."""
    known = [point for point in points if not point.iterations_peak_bounded]
    return known if len({point.size for point in known}) >= 3 else list(points)


def fit_phase(design: list[tuple[float, ...]], peaks: list[int],
              weights: list[float] | None = None) -> tuple[float, ...]:
    """Non-negative least squares of ``peaks`` on the terms (columns scaled to unit maximum,
    an all-zero column left at zero; each squared residual times its ``weights``, default
    1); held at the largest peak when the fit's growth over the probes is within
    ``GROWTH_FLOOR_BYTES`` or ``GROWTH_NOISE_RATIO`` times the residuals' (weighted) root mean
    square. A probe of weight 0 counts for nothing, the held peak included."""
    import numpy as np
    from scipy.optimize import nnls

    matrix, values = np.array(design), np.array(peaks, dtype=float)
    weight = np.ones(len(values)) if weights is None else np.array(weights, dtype=float)
    scale = matrix.max(axis=0)
    scale[scale == 0] = 1.0
    root = np.sqrt(weight)[:, None]
    solution, _ = nnls(matrix / scale * root, values * root[:, 0])
    coefficients = solution / scale
    fitted = (matrix @ coefficients)[weight > 0]
    values = values[weight > 0]
    weight = weight[weight > 0]
    # The fit never falls as the size grows (non-negative terms that grow with it), so its
    # range over the probes is its growth, whatever varies (unknowns, angles, cut chunks).
    growth = fitted.max() - fitted.min()
    spread = float(np.sqrt(np.sum(weight * (values - fitted) ** 2) / np.sum(weight)))
    if growth <= max(GROWTH_FLOOR_BYTES, GROWTH_NOISE_RATIO * spread):
        return (float(values.max()),) + (0.0,) * (len(TERMS) - 1)
    return tuple(float(value) for value in coefficients)


def operator_share(operators: int, ranks: int, distribute_physics: bool) -> float:
    """The fraction of the operators (and their measurements) one rank holds."""
    if not distribute_physics or ranks <= 1:
        return 1.0
    return math.ceil(operators / ranks) / operators
