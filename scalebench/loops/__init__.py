"""The solvers' loops, independent of benchopt: PnP reconstruction (``pnp``), denoiser timing
(``denoising``) and the training step (``training``); their parameters (``params``, which
imports no torch, as this package's own namespace does)."""

from scalebench.loops.params import SOLVERS

__all__ = ["SOLVERS"]
