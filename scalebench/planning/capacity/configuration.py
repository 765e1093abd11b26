"""Configurations: what a calibration is of, and the key that tells one calibration from another.

A configuration is an experiment of the inference benchmark with its size parameter left out:
its dataset and solver with their parameters, the device type it runs on. It answers what a
calibration needs of it at any size: whether the size is valid, the term counts of one rank
there (``Sizes``), its feature maps and its operator's workspace. Its key covers the
configuration with every parameter resolved (but those that change no rank's peak), the
number of probe iterations, the code (commit and uncommitted changes), the numerical
packages and the machine's CPU and GPU models, so that a change to any of them calibrates
again.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from functools import cached_property

from scalebench.errors import ConfigError
from scalebench.planning.capacity.allocator import FLOAT32_BYTES
from scalebench.planning.capacity.model import MemoryModel, Sizes, operator_share
from scalebench.planning.capacity.time_model import Counts, evaluations
from scalebench.rank.devices import device_type

# Probe iterations: the first builds what the loop keeps, the second shows it does not grow.
# Part of the key: probes of another count are another calibration.
PROBE_ITERATIONS = 2
# Solver parameters that change no rank's peak (the probes run two iterations; the ranks are
# the model's): calibrations are shared across them.
NOT_MEMORY = ("max_iter", "eval_every")
# PnP parameters that only an algorithm's own arithmetic reads: configurations that differ in
# these alone build the same operator and denoiser and share their probes (``family_key``).
ALGORITHM_PARAMS = ("algorithm", "step_size", "step_scale", "relaxation", "fista_a",
                    "red_lambda", "dpir_sigma_start", "dpir_lambda")
# Provenance fields (provenance.collect) that decide a calibration besides the configuration:
# the code, the numerical packages and the machine (its probes' step times are this
# machine's; the thread count is a solver parameter, in the configuration).
ENVIRONMENT = ("code_commit", "code_diff_sha256", "torch", "deepinv", "numpy", "astra",
               "cpu_model", "gpu_models")


@dataclass(frozen=True)
class Configuration:
    """An inference experiment whose ``size_parameter`` varies: its dataset and solver with
    their given parameters (the size among them or not) and the device it runs on."""

    dataset: str
    dataset_params: dict
    solver: str
    solver_params: dict
    size_parameter: str

    def at(self, size: int) -> Configuration:
        return replace(self, dataset_params={**self.dataset_params,
                                             self.size_parameter: size})

    @property
    def device(self) -> str:
        """The device type the runs take ('auto': CUDA where there is one)."""
        return device_type(self.resolved_solver()["device"])

    def key_record(self) -> dict:
        """What identifies the configuration: every parameter resolved (defaults filled, the
        device by its type), the size left out."""
        dataset = self.resolved_dataset()
        dataset.pop(self.size_parameter)
        return {"dataset": self.dataset, "solver": self.solver,
                "size_parameter": self.size_parameter, "dataset_params": dataset,
                "solver_params": {**{key: value for key, value in self.resolved_solver().items()
                                     if key not in NOT_MEMORY and not key.startswith("slurm_")},
                                  "device": self.device}}

    def family_record(self) -> dict | None:
        """``key_record`` without ``ALGORITHM_PARAMS``: what the configurations sharing this
        one's operator and denoiser have in common; None for a solver without algorithms."""
        if self.solver != "pnp":
            return None
        record = self.key_record()
        record["solver_params"] = {key: value for key, value in record["solver_params"].items()
                                   if key not in ALGORITHM_PARAMS}
        return record

    @property
    def algorithm(self) -> str:
        """The PnP algorithm the configuration runs (its solver's name otherwise)."""
        return str(self.resolved_solver().get("algorithm", self.solver))

    def norm_run_key(self) -> dict:
        """What a run's config says of the operator norm it uses (data.norm_lookup.run_key):
        the key of the norm cache a prediction reads without building the problem."""
        from scalebench.data.norm_lookup import run_key
        from scalebench.problems import PROBLEMS

        return run_key(self.dataset, PROBLEMS[self.dataset].recorded(self.resolved_dataset()),
                       self.device, self.resolved_solver().get("num_threads", 0))

    def without_size(self) -> dict:
        return {"dataset": self.dataset, "solver": self.solver,
                "size_parameter": self.size_parameter,
                "dataset_params": {key: value for key, value in self.dataset_params.items()
                                   if key != self.size_parameter},
                "solver_params": self.solver_params}

    def resolved_dataset(self) -> dict:
        from scalebench.param_spec import resolved_parameters
        from scalebench.problems import PROBLEMS

        return resolved_parameters(self.dataset_params, PROBLEMS[self.dataset].params)

    @property
    def spec(self):
        """The solver's registered spec (scalebench.loops.SOLVERS)."""
        from scalebench.loops import SOLVERS

        return SOLVERS[self.solver]

    def resolved_solver(self) -> dict:
        """Every parameter (defaults filled), those a run's record leaves out while null
        left out: a parameter added since keeps earlier calibrations' keys."""
        from scalebench.loops import SOLVERS
        from scalebench.param_spec import recorded_parameters, resolved_parameters

        specs = SOLVERS[self.solver].params
        return recorded_parameters(resolved_parameters(self.solver_params, specs), specs)

    def valid(self, size: int) -> bool:
        """Whether the problem accepts ``size`` for the size parameter, and the denoiser the
        image it makes (DRUNet: sides a multiple of 8)."""
        from scalebench.denoisers.tiles import check_denoiser_fits
        from scalebench.param_spec import validate_parameters
        from scalebench.problems import PROBLEMS

        spec, sized = PROBLEMS[self.dataset], self.at(size)
        try:
            validate_parameters(f"dataset '{self.dataset}'", sized.dataset_params, spec.params)
            if self.spec.uses_denoiser:  # CGLS, FBP: no denoiser to fit
                check_denoiser_fits(self.resolved_solver(),
                                    spec.image_shape(**sized.resolved_dataset()))
        except (ConfigError, ValueError):
            return False
        return True

    def sizes(self, size: int, ranks: int, model: MemoryModel | None) -> Sizes:
        """The term counts of one of ``ranks`` ranks at ``size`` (measurements by the model's
        law; without a model, none)."""
        from scalebench.denoisers.tiles import denoised_pixels

        shape = self.image_shape(size)
        solver = self.resolved_solver()
        measurements = 0.0
        if model is not None and self.spec.uses_operator:
            measurements = model.measurements(size) * self.physics_share(size, ranks)
        denoised = denoised_pixels(solver, shape, ranks) if self.spec.uses_denoiser else 0
        return Sizes(math.prod(shape), measurements, denoised, self.workspace(size))

    def image_shape(self, size: int) -> tuple[int, ...]:
        """The shape of the image (channels first) the problem makes at ``size``."""
        from scalebench.problems import PROBLEMS

        return PROBLEMS[self.dataset].image_shape(**self.at(size).resolved_dataset())

    def time_counts(self, size: int, ranks: int) -> Counts:
        """What one of ``ranks`` ranks' time terms are functions of at ``size``: the
        unknowns, the pixels of its denoising pass (tiles.pass_pixels: every tile, where a
        call's memory counts one batch), its share of the operators."""
        from scalebench.denoisers.tiles import pass_pixels

        shape = self.image_shape(size)
        denoised = pass_pixels(self.resolved_solver(), shape, ranks) \
            if self.spec.uses_denoiser else 0
        return Counts(math.prod(shape), denoised, self.physics_share(size, ranks))

    def physics_share(self, size: int, ranks: int) -> float:
        """The fraction of the operators one of ``ranks`` ranks holds and applies (1 where
        the solver builds none)."""
        from scalebench.problems import PROBLEMS

        if not self.spec.uses_operator:
            return 1.0
        values = self.at(size).resolved_dataset()
        return operator_share(PROBLEMS[self.dataset].num_operators(**values), ranks,
                              self.resolved_solver().get("distribute_physics", False))

    def run_length(self) -> tuple[int, int]:
        """(iterations, evaluations) of one run: ``max_iter``, and the evaluations its
        ``eval_every`` makes."""
        solver = self.resolved_solver()
        return solver["max_iter"], evaluations(solver["max_iter"], solver.get("eval_every", 1))

    @cached_property
    def feature_channels(self) -> int:
        """Channels of the denoiser's full-resolution feature maps with the weights it runs
        (0: TV, which has none)."""
        from scalebench.denoisers.catalog import feature_channels, resolve_weights
        from scalebench.problems import PROBLEMS

        solver = self.resolved_solver()
        if not self.spec.uses_denoiser:
            return 0
        channels = PROBLEMS[self.dataset].image_shape(**self.resolved_dataset())[0]
        weights = resolve_weights(solver["denoiser"], channels, solver["pretrained"])
        return feature_channels(solver["denoiser"], weights.widths)

    def feature_map_bytes(self, size: int) -> int:
        """Bytes of one full-resolution feature map of a denoiser call at ``size`` on one rank
        (the image, or its batch of tiles); 0 for TV."""
        from scalebench.denoisers.tiles import denoised_pixels

        if self.feature_channels == 0:
            return 0
        return FLOAT32_BYTES * self.feature_channels * \
            denoised_pixels(self.resolved_solver(), self.image_shape(size), 1)

    def workspace(self, size: int, chunk_elements: int | None = None) -> int:
        """Elements of an operator's largest chunk at ``size`` (0: no chunked operator; the
        denoiser solver builds none)."""
        from scalebench.problems import PROBLEMS

        if not self.spec.uses_operator:
            return 0
        return PROBLEMS[self.dataset].workspace(self.at(size).resolved_dataset(),
                                                chunk_elements)


def configuration_key(configuration: Configuration) -> str:
    """The configuration and what else decides its calibration, the probed sizes aside."""
    return environment_key(configuration.key_record())


def family_key(configuration: Configuration) -> str | None:
    """``configuration_key`` of its ``family_record`` (None where it has none): equal for the
    configurations that differ in their algorithm alone."""
    record = configuration.family_record()
    return None if record is None else environment_key({"family": record})


def environment_key(record: dict) -> str:
    """A key of ``record``, the probe iterations and ``ENVIRONMENT`` of this machine."""
    from provenance import canonical_json, collect

    environment = collect()
    keyed = {"configuration": record, "iterations": PROBE_ITERATIONS,
             "environment": {field: environment.get(field) for field in ENVIRONMENT}}
    return hashlib.sha256(canonical_json(keyed).encode()).hexdigest()[:24]


def valid_at_most(configuration: Configuration, size: int, search: int = 256) -> int | None:
    """The largest valid size <= ``size`` (within ``search`` steps), None when there is none."""
    for candidate in range(size, max(size - search, 0), -1):
        if configuration.valid(candidate):
            return candidate
    return None
