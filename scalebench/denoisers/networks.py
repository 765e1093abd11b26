"""A registered denoiser with the weights ``pretrained`` resolves to (scalebench.denoisers.catalog),
built by its spec (scalebench.denoisers.kinds), and the provenance of the weights that ran."""

from __future__ import annotations

import hashlib
import json

import torch
from torch import nn

from provenance import array_digest
from scalebench.denoisers.catalog import Weights, denoiser_spec, resolve_weights
from scalebench.denoisers.modules import IndependentTV, load_network

__all__ = ["IndependentTV", "build_denoiser", "load_denoiser", "load_network",
           "weights_record"]


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


def build_denoiser(name: str, channels: int, pretrained: str = "none",
                   device: torch.device | str = "cpu", seed: int = 0) -> nn.Module:
    """An eval-mode denoiser called as ``denoiser(x, sigma)``; random init is seeded."""
    return load_denoiser(name, channels, pretrained, device, seed)[0]
