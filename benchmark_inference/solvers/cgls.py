"""CGLS: conjugate gradient on the normal equations, unregularised (loops.cgls)."""

from scalebench.benchopt_glue.inference import BaselineSolver
from scalebench.loops import SOLVERS
from scalebench.loops.cgls import CGLSLoop
from scalebench.param_spec import benchopt_parameters


class Solver(BaselineSolver):
    # Solver name in configs and results.
    name = "cgls"
    # What configs may give it (inference_parameters.CGLS_SPEC); applies to every dataset.
    spec = SOLVERS[name]
    # Contract of every parameter (type, range, meaning).
    param_specs = spec.params
    # Default grid: each parameter at its default.
    parameters = benchopt_parameters(param_specs)
    # Installed with scalebench; no extra requirement.
    requirements = []

    def make_loop(self, profiler):
        # Starts from x = 0: the first row is the zero image, each next row one iteration.
        return CGLSLoop(self.problem, profiler)
