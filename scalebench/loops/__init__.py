"""The solvers' loops, independent of benchopt: PnP reconstruction (``pnp``, its algorithms
in ``algorithms``), denoiser timing (``denoising``), the classical baselines (``cgls``,
``fbp``, ``fdk``, ``clean``) and the training step (``training``);
their parameters (``params``) and specs (``spec``), which import no torch, as this package's
own namespace does.

``SOLVERS`` is the registry of the inference benchmark's solvers, by the name configs use:
adding one is a spec and an entry here (its benchopt file names it)."""

from scalebench.loops.inference_parameters import BASELINE_SPECS, DENOISING_SPEC, PNP_SPEC
from scalebench.loops.spec import SolverSpec

SOLVERS: dict[str, SolverSpec] = {spec.name: spec
                                  for spec in (PNP_SPEC, DENOISING_SPEC, *BASELINE_SPECS)}

__all__ = ["SOLVERS", "SolverSpec"]
