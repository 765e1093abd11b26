"""The solvers' loops, independent of benchopt: PnP reconstruction and denoiser timing."""

from scalebench.loops.denoising import DENOISING_PARAMS
from scalebench.loops.pnp import PNP_PARAMS
from scalebench.params import Param

# Parameter specifications of every solver, by the solver name used in configs and results.
SOLVERS: dict[str, dict[str, Param]] = {"pnp": PNP_PARAMS, "denoiser": DENOISING_PARAMS}
