"""Feldkamp-Davis-Kress reconstruction of circular cone-beam CT (loops.fdk)."""

from scalebench.benchopt_glue.inference import BaselineSolver
from scalebench.loops import SOLVERS
from scalebench.loops.fdk import FDKLoop
from scalebench.param_spec import benchopt_parameters


class Solver(BaselineSolver):
    # Solver name in configs and results.
    name = "fdk"
    # What configs may give it (inference_parameters.FDK_SPEC); walnut_conebeam only.
    spec = SOLVERS[name]
    # Contract of every parameter (type, range, meaning).
    param_specs = spec.params
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(param_specs)
    # Installed with scalebench; no extra requirement (any projector's adjoint serves).
    requirements = []
    # `benchopt test`: the walnut's own small test set-up (the cache must hold a walnut, as
    # for the dataset's test), its one step.
    test_config = {"dataset": {"name": "walnut_conebeam", "binning": 2, "num_projections": 8,
                               "projector": "torch"},
                   "max_iter": 1, "device": "cpu"}

    @classmethod
    def is_installed(cls, **kwargs) -> bool:
        # fdk applies to walnut_conebeam alone, so it runs only where the walnut is fetched:
        # benchopt's suite skips it otherwise, as it skips that dataset.
        from scalebench.data.cache import cache_root
        from scalebench.data.walnut import is_unpacked

        return super().is_installed(**kwargs) and is_unpacked(cache_root())

    def make_loop(self, profiler):
        # Starts from the zero volume; its one iteration is the reconstruction.
        return FDKLoop(self.problem, self.params["filter"], profiler)
