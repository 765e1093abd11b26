"""The tunable search space of each (algorithm, denoiser kind) of the ``pnp`` solver: which of
its parameters a tuner searches, over what range and on what scale. Read by the tuner, the
docs (docs/generate.py) and the config checks alike (``space_for``, ``check_range``). Imports
no torch.

Ranges are in each parameter's own units, but for two whose useful value follows the
operator's scale: the step is the solver parameter ``step_scale`` (gamma in units of
1 / ||A||^2, converted by the run itself), and RED's ``red_lambda`` is declared in units of
||A||^2 (``Range.unit``; ``solver_value`` converts it, with the ||A||^2 that every pnp row
records as ``objective_operator_norm_sq``). The sigma ranges were chosen from
docs/performance.md's sigma grid (CT 128² and super-resolution 128²) and a measurement on
configs/default.yml's CT problem (docs/datasets-and-solvers.md, "Tunable spaces").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebench.denoisers.spec import DenoiserSpec
from scalebench.errors import ConfigError
from scalebench.loops.inference_parameters import PNP_PARAMS
from scalebench.param_spec import Param

SCALES = ("log", "linear")
# The units a range may be declared in: the parameter's own, or ||A||^2 (value x ||A||^2).
NORM_UNIT = "||A||^2"
UNITS = ("", NORM_UNIT)


@dataclass(frozen=True)
class Range:
    """One tuned parameter: a real ``pnp`` parameter searched from ``low`` to ``high``."""

    name: str
    low: float
    high: float
    scale: str  # "log": uniform in log(value); "linear": uniform in value
    doc: str = ""
    unit: str = ""  # "": the parameter's own; NORM_UNIT: the solver gets value x ||A||^2


@dataclass(frozen=True)
class Space:
    """What a tuner searches for one algorithm with one denoiser kind."""

    algorithm: str
    denoiser: str
    ranges: tuple[Range, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.ranges)

    def range(self, name: str) -> Range:
        """The range of ``name``; ConfigError naming the space's parameters otherwise."""
        for declared in self.ranges:
            if declared.name == name:
                return declared
        raise ConfigError(f"pnp {self.algorithm} with {self.denoiser}: '{name}' is not "
                          f"tuned (its space: {', '.join(self.names)})")


# sigma: the denoiser's strength. For tv and wavelet it is a regularisation weight applied
# after a gradient step of gamma = 1/||A||^2 (pgd, fista) or a prox of gamma = 10/||A||^2
# (hqs, admm, drs); for bm3d and the networks a noise standard deviation (images in [0, 1]).
# Measured on configs/default.yml's CT problem (40 iterations) and in docs/performance.md's
# grid: the gradient algorithms peak at 0.001 or below (0.003 on super-resolution; pgd's
# best rises to 0.0005-0.002 at step_scale 1.9), the prox algorithms at 0.01 with tv and
# wavelet, 0.003 to 0.03 with DRUNet and 0.05 or above with bm3d.
REGULARISING = ("tv", "wavelet")
GRADIENT = ("pgd", "fista")
SIGMA_RANGES = {  # (algorithm family, denoiser family) -> (low, high)
    ("gradient", "regularising"): (1e-4, 3e-2),
    ("gradient", "noise"): (1e-4, 3e-2),
    ("prox", "regularising"): (1e-3, 1e-1),
    ("prox", "noise"): (2e-3, 2e-1),
    ("red", "regularising"): (1e-3, 1e-1),
    ("red", "noise"): (2e-3, 2e-1),
}
# dpir's last level stays below its first (dpir_sigma_start's range starts above it).
DPIR_SIGMA = (1e-3, 3e-2)
DPIR_SIGMA_START = (5e-2, 0.5)

# gamma in units of 1/||A||^2: proximal gradient (and RED's gradient step) is stable below
# 2; FISTA's momentum needs at most 1 (measured: 1.5 diverges on CT), a little above searched.
STEPS = {"pgd": 1.9, "red": 1.9, "fista": 1.2}
RELAXATION = {
    "pgd": "over-relaxation beta: x <- beta D(...) + (1 - beta) x",
    "hqs": "over-relaxation beta: x <- beta D(prox(x)) + (1 - beta) x",
    "admm": "dual step beta: z <- z + beta (u - x)",
    "drs": "dual step beta: z <- z + beta (x - u)",
}


def _sigma(algorithm: str, denoiser: DenoiserSpec) -> tuple[Range, ...]:
    """sigma's range; none for a blind denoiser, but in dpir, whose gammas follow sigma."""
    if algorithm == "dpir":
        low, high = DPIR_SIGMA
        return (Range("denoiser_sigma", low, high, "log", "the last denoiser level"),)
    if denoiser.blind:
        return ()
    family = "gradient" if algorithm in GRADIENT else "red" if algorithm == "red" else "prox"
    kind = "regularising" if denoiser.name in REGULARISING else "noise"
    low, high = SIGMA_RANGES[(family, kind)]
    return (Range("denoiser_sigma", low, high, "log", "the denoiser's strength"),)


def _algorithm_ranges(algorithm: str) -> tuple[Range, ...]:
    """The ranges of an algorithm's own parameters (sigma's apart)."""
    step = (Range("step_scale", 0.25, STEPS[algorithm], "linear",
                  "gamma in units of 1/||A||^2 (1: the default)"),) \
        if algorithm in STEPS else ()
    relaxation = (Range("relaxation", 0.5, 1.9, "linear", RELAXATION[algorithm]),) \
        if algorithm in RELAXATION else ()
    if algorithm == "red":
        return (*step, Range("red_lambda", 0.01, 1.0, "log",
                             "weight of the residual x - D(x), in units of ||A||^2",
                             unit=NORM_UNIT))
    if algorithm == "dpir":
        low, high = DPIR_SIGMA_START
        return (Range("dpir_sigma_start", low, high, "log", "the first denoiser level"),
                Range("dpir_lambda", 0.01, 1.0, "log",
                      "gamma_k = (sigma_k / max(0.01, sigma))^2 / dpir_lambda / ||A||^2"))
    return (*step, *relaxation)


def build_spaces(algorithms, denoisers: list[DenoiserSpec]) -> dict[tuple[str, str], Space]:
    """One space per (algorithm, denoiser kind)."""
    return {(a, d.name): Space(a, d.name, (*_sigma(a, d), *_algorithm_ranges(a)))
            for a in algorithms for d in denoisers}


def _registry() -> dict[tuple[str, str], Space]:
    from scalebench.denoisers.kinds import bm3d, dncnn, drunet, tv, wavelet
    from scalebench.loops.algorithms import ALGORITHMS

    return build_spaces(ALGORITHMS, [tv.SPEC, wavelet.SPEC, bm3d.SPEC, dncnn.SPEC, drunet.SPEC])


SPACES: dict[tuple[str, str], Space] = _registry()


def space_for(algorithm: str, denoiser: str) -> Space:
    """The declared space of ``algorithm`` with ``denoiser``; ConfigError when none is."""
    if (algorithm, denoiser) not in SPACES:
        algorithms = sorted({a for a, _ in SPACES})
        denoisers = sorted({d for _, d in SPACES})
        raise ConfigError(f"no tunable space for pnp algorithm '{algorithm}' with denoiser "
                          f"'{denoiser}' (algorithms: {', '.join(algorithms)}; denoisers: "
                          f"{', '.join(denoisers)})")
    return SPACES[(algorithm, denoiser)]


def check_range(space: Space, name: str, low: float, high: float,
                params: dict[str, Param] | None = None) -> None:
    """Raise a one-line ConfigError when ``name`` is not a numeric ``pnp`` parameter, or
    low..high (in the space's units for ``name``) is empty or leaves its bounds. ``params``:
    the parameters checked against (the pnp solver's by default)."""
    params = PNP_PARAMS if params is None else params
    owner = f"pnp {space.algorithm} with {space.denoiser}"
    numeric = sorted(k for k, p in params.items() if p.kind in (int, float) and not p.choices)
    if name not in params or name not in numeric:
        raise ConfigError(f"{owner}: '{name}' is not a numeric parameter of solver 'pnp' "
                          f"(tunable: {', '.join(numeric)})")
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ConfigError(f"{owner}: the range of '{name}' is empty or not finite "
                          f"({low}..{high}); give low < high")
    declared = next((r for r in space.ranges if r.name == name), None)
    _check_bounds(owner, name, low, high, params[name],
                  declared.unit if declared else "")


def _check_bounds(owner: str, name: str, low: float, high: float, param: Param,
                  unit: str) -> None:
    """low..high within ``param``'s bounds: a range in units of ||A||^2 only for bounds
    that no positive factor changes (a minimum of 0 or none, no maximum)."""
    minimum, maximum = param.minimum, param.maximum
    if unit == NORM_UNIT and (minimum not in (None, 0.0) or maximum is not None):
        raise ConfigError(f"{owner}: '{name}' is bounded ({param.describe()}): its range "
                          f"cannot be in units of {NORM_UNIT}")
    below = minimum is not None and (low <= minimum if param.exclusive_minimum
                                     else low < minimum)
    above = maximum is not None and high > maximum
    if below or above:
        raise ConfigError(f"{owner}: the range {low}..{high} of '{name}' leaves its bounds "
                          f"({param.describe()})")


def check_space(space: Space, params: dict[str, Param] | None = None) -> None:
    """Every range of ``space`` checked (``check_range``), its scale and unit known, and a
    log scale's range positive."""
    for declared in space.ranges:
        check_range(space, declared.name, declared.low, declared.high, params)
        if declared.scale not in SCALES or declared.unit not in UNITS:
            raise ConfigError(f"pnp {space.algorithm} with {space.denoiser}: '{declared.name}'"
                              f" has scale '{declared.scale}' and unit '{declared.unit}' "
                              f"(scales: {', '.join(SCALES)}; units: '', {NORM_UNIT})")
        if declared.scale == "log" and declared.low <= 0:
            raise ConfigError(f"pnp {space.algorithm} with {space.denoiser}: '{declared.name}'"
                              f" is searched on a log scale from {declared.low}: give low > 0")


def solver_value(declared: Range, value: float, norm_squared: float) -> float:
    """The solver parameter's value for ``value`` in the range's units (``norm_squared``:
    the operator's ||A||^2, as the rows record it)."""
    return value * norm_squared if declared.unit == NORM_UNIT else value
