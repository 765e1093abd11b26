"""The modules the denoiser specs build (scalebench.denoisers.kinds): a deepinv network with
given weights, and a TV denoiser whose calls are independent. Imports nothing of the
registry, which imports the specs."""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING

import torch
from torch import nn

from scalebench.errors import MissingFileError

if TYPE_CHECKING:
    from scalebench.denoisers.spec import Weights


class IndependentTV(nn.Module):
    """deepinv's TV denoiser with every call independent and exactly ``iterations`` long.

    deepinv's ``TVDenoiser`` keeps its primal and dual variables between calls and warm-starts
    from them whenever the input shape repeats, and stops once its tolerance is met: two calls
    on one input could then differ in result and cost, and tiles of one batch would inherit the
    previous batch's state. Here each call starts cold, never stops early, and keeps no state.
    """

    def __init__(self, iterations: int) -> None:
        super().__init__()
        import deepinv as dinv

        # crit 0: the relative change is never below it, so all iterations run.
        self.tv = dinv.models.TVDenoiser(n_it_max=iterations, crit=0.0)
        self.architecture = {"iterations": iterations}  # what rows record of it

    def forward(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        self.tv.restart = True
        try:
            return self.tv(x, sigma)
        finally:
            self.tv.x2 = self.tv.u2 = None  # hold no image-sized state between calls


def load_network(architecture: type[nn.Module], name: str, channels: int, weights: Weights,
                 device: torch.device | str) -> nn.Module:
    """A deepinv network class (``in_channels``, ``out_channels``, ``pretrained`` and width
    keywords) with ``weights`` (random ones: the seeded initialisation)."""
    source = str(weights.path) if weights.path is not None else None
    try:
        return architecture(in_channels=channels, out_channels=channels, pretrained=source,
                            device=device, **(weights.widths or {}))
    except (RuntimeError, ValueError, OSError, EOFError, pickle.UnpicklingError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise MissingFileError(f"denoiser '{name}': cannot load weights {weights.path}: "
                               f"{type(error).__name__}: {first_line}") from None


class HostBM3D(nn.Module):
    """deepinv's BM3D (the ``bm3d`` package, CPU only) on a CPU copy of the input, its result
    on the input's device (scalebench.denoisers.kinds.bm3d)."""

    def __init__(self) -> None:
        super().__init__()
        from deepinv.models import BM3D

        self.bm3d = BM3D(use_legacy=True, device="cpu")

    def forward(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        return self.bm3d(x.detach().cpu(), float(sigma)).to(x.device)
