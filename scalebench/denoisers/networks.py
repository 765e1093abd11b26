"""The denoisers as modules: each registered spec builds its own (scalebench.denoisers.kinds);
here the shared parts: loading a deepinv network with the weights ``pretrained`` resolved to
(scalebench.denoisers.catalog), a TV denoiser whose calls are independent, and the provenance
of the weights that ran."""

from __future__ import annotations

import hashlib
import json
import pickle

import torch
from torch import nn

from provenance import array_digest
from scalebench.denoisers.catalog import Weights, denoiser_spec, resolve_weights
from scalebench.errors import MissingFileError


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


def _state_digest(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for key, tensor in model.state_dict().items():
        digest.update(key.encode())
        digest.update(array_digest(tensor).encode())
    return digest.hexdigest()


def weights_record(name: str, weights: Weights, model: nn.Module) -> dict[str, str]:
    """The ``prov_weights``, ``prov_weights_sha256`` and ``prov_denoiser_architecture``
    fields: which weights ran, their sha256 (of the file; of the parameters for random
    weights; empty for TV) and the network's class, widths and parameter count."""
    from scalebench.data.fetch import file_digest

    if weights.source == "none":
        sha256, architecture = "", {"name": name, **getattr(model, "architecture", {})}
    else:
        sha256 = file_digest(weights.path) if weights.path is not None \
            else _state_digest(model)
        widths = weights.widths if weights.widths is not None \
            else denoiser_spec(name).default_widths
        architecture = {"name": name, "class": type(model).__name__, "widths": widths,
                        "parameters": sum(p.numel() for p in model.parameters())}
    return {"weights": weights.label, "weights_sha256": sha256,
            "denoiser_architecture": json.dumps(architecture, sort_keys=True)}


def load_denoiser(name: str, channels: int, pretrained: str = "auto",
                  device: torch.device | str = "cpu",
                  seed: int = 0) -> tuple[nn.Module, dict[str, str]]:
    """An eval-mode denoiser called as ``denoiser(x, sigma)`` (random init is seeded) and the
    provenance of its weights (``weights_record``)."""
    spec = denoiser_spec(name)
    weights = resolve_weights(name, channels, pretrained)
    torch.manual_seed(seed)
    model = spec.build(channels, weights, device)
    # Inference only: no parameter needs a gradient (and deepinv's distributed tiling then
    # skips its gradient synchronisation).
    model = model.to(device).eval().requires_grad_(False)
    return model, weights_record(name, weights, model)


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


def build_denoiser(name: str, channels: int, pretrained: str = "none",
                   device: torch.device | str = "cpu", seed: int = 0) -> nn.Module:
    """An eval-mode denoiser called as ``denoiser(x, sigma)``; random init is seeded."""
    return load_denoiser(name, channels, pretrained, device, seed)[0]


class HostBM3D(nn.Module):
    """deepinv's BM3D (the ``bm3d`` package, CPU only) on a CPU copy of the input, its result
    on the input's device (scalebench.denoisers.kinds.bm3d)."""

    def __init__(self) -> None:
        super().__init__()
        from deepinv.models import BM3D

        self.bm3d = BM3D(use_legacy=True, device="cpu")

    def forward(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        return self.bm3d(x.detach().cpu(), float(sigma)).to(x.device)
