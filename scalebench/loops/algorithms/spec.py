"""A plug-and-play algorithm as the ``pnp`` solver's ``algorithm`` parameter names it: how one
iteration combines the three measured steps its loop offers (``Loop``, which
scalebench.loops.pnp.PnPLoop implements):

- ``loop.gradient(x)``: A^T (A x - y), the "grad" step;
- ``loop.data_prox(z, gamma)``: argmin_x 1/2 ||A x - y||^2 + 1/(2 gamma) ||x - z||^2, the
  "prox" step (closed form where the operator allows it, else warm-started conjugate
  gradient);
- ``loop.denoise(x, sigma)``: the denoiser, the "denoise" step.

Each algorithm keeps its own state (auxiliary variables) in its instance; ``x`` is the
estimate the rows evaluate. No module here imports torch: its iterations use tensor methods
only, so the config checks read the registry without loading the numerical stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from scalebench.errors import ConfigError

if TYPE_CHECKING:
    import torch


class Loop(Protocol):
    """What an iteration reads of its loop: the measured steps, the operator's Lipschitz
    constant ||A||^2, the gradient step, the denoiser strength and the solver's parameters."""

    params: dict
    sigma: float
    lipschitz: float
    step_size: float

    def gradient(self, x: torch.Tensor) -> torch.Tensor: ...

    def data_prox(self, z: torch.Tensor, gamma: float) -> torch.Tensor: ...

    def denoise(self, x: torch.Tensor, sigma: float) -> torch.Tensor: ...

    def relax(self, new: torch.Tensor, previous: torch.Tensor) -> torch.Tensor: ...


class Iteration(Protocol):
    """One algorithm's state; ``step`` performs iteration ``k`` (from 0) and returns x."""

    x: torch.Tensor

    def step(self, loop: Loop, k: int) -> torch.Tensor: ...


# The default gamma of algorithms with a data prox, in units of 1 / ||A||^2.
PROX_STEP = 10.0


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    description: str
    # Calls the data term's proximal operator (the "prox" step) rather than its gradient.
    needs_prox: bool
    # (loop, x0) -> the algorithm's state, its estimate x = x0.
    start: type
    # gamma when ``step_size`` and ``step_scale`` are null, in units of 1 / ||A||^2 (the
    # default step_scale): 1 for a gradient step (the largest that keeps proximal gradient
    # stable); a data prox is stable at any gamma and gains from a larger one (10: measured
    # on CT and super-resolution, tools/methods_comparison.py).
    default_step_scale: float = 1.0
    # Reads ``loop.step_size`` (dpir's gammas follow its own schedule instead).
    uses_step: bool = True


def check_step(params: dict) -> None:
    """Raise ConfigError when a run gives its step twice (``step_size`` and ``step_scale``)."""
    if params.get("step_size") is not None and params.get("step_scale") is not None:
        raise ConfigError(f"solver 'pnp': give step_size ({params['step_size']}) or "
                          f"step_scale ({params['step_scale']}), not both: step_size is "
                          f"gamma itself, step_scale gamma in units of 1 / ||A||^2")


def run_step(algorithm: AlgorithmSpec, params: dict, lipschitz: float) -> float:
    """gamma of a run: ``step_size``, else ``step_scale`` (null: the algorithm's default)
    divided by ``lipschitz`` = ||A||^2."""
    check_step(params)
    if params.get("step_size") is not None:
        return params["step_size"]
    scale = params.get("step_scale")
    return (algorithm.default_step_scale if scale is None else scale) / lipschitz
