"""The denoisers (learned and classical): architectures, weights and their provenance."""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from provenance import array_digest
from scalebench.errors import ConfigError, MissingFileError

if TYPE_CHECKING:
    from scalebench.data.manifest import Entry

DENOISERS = ("tv", "drunet", "dncnn")
TV_ITERATIONS = 50  # exactly this many per call (IndependentTV): every TV step costs the same
# deepinv publishes weights per architecture for grey and colour images: the manifest's
# entries "<architecture>_<gray|color>" (scalebench/data/manifest.toml).
HUB_CHANNELS = {1: "gray", 3: "color"}
# 'auto': deepinv's published file when it is in the torch hub cache, else the bundled one;
# 'bundled': the small networks scalebench trains and ships (scalebench.denoisers.bundled); 'hub':
# deepinv's published file only; 'none': seeded random weights (cost-only runs). Any other
# value is the path of a weights file.
PRETRAINED_VALUES = ("auto", "bundled", "hub", "none")
# deepinv's architectures when no bundled record says otherwise (the published weights' ones).
DEFAULT_WIDTHS = {"drunet": {"nc": [64, 128, 256, 512], "nb": 4},
                  "dncnn": {"depth": 20, "nf": 64}}
SIZE_MULTIPLE = {"drunet": 8, "dncnn": 1, "tv": 1}  # DRUNet downsamples three times
# Radius (pixels) beyond which an input pixel cannot change an output pixel: the overlap that
# makes tiles exact. DnCNN: 20 convolutions of 3x3; TV: each iteration reads one neighbour
# further (a forward and a backward difference). DRUNet (deepinv's default widths, 4 blocks
# per scale): 183 pixels measured by an impulse at 512^2, so an overlap of 184 or more
# (a multiple of its 8-pixel grid) for exact tiles.
RECEPTIVE_RADIUS = {"dncnn": 20, "tv": TV_ITERATIONS, "drunet": 184}


class IndependentTV(nn.Module):
    """deepinv's TV denoiser with every call independent and exactly TV_ITERATIONS long.

    deepinv's ``TVDenoiser`` keeps its primal and dual variables between calls and warm-starts
    from them whenever the input shape repeats, and stops once its tolerance is met: two calls
    on one input could then differ in result and cost, and tiles of one batch would inherit the
    previous batch's state. Here each call starts cold, never stops early, and keeps no state.
    """

    def __init__(self) -> None:
        super().__init__()
        import deepinv as dinv

        # crit 0: the relative change is never below it, so all iterations run.
        self.tv = dinv.models.TVDenoiser(n_it_max=TV_ITERATIONS, crit=0.0)

    def forward(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        self.tv.restart = True
        try:
            return self.tv(x, sigma)
        finally:
            self.tv.x2 = self.tv.u2 = None  # hold no image-sized state between calls


def hub_weights_entry(name: str, channels: int) -> Entry:
    """The manifest entry of deepinv's published weights for ``name`` on ``channels``."""
    from scalebench.data.manifest import load_manifest

    if channels not in HUB_CHANNELS:
        raise ConfigError(f"denoiser '{name}': published weights exist for 1 or 3 channels, "
                          f"not {channels} (use pretrained 'none' or a weights file)")
    return load_manifest()[f"{name}_{HUB_CHANNELS[channels]}"]


def bundled_weights_entry(name: str, channels: int) -> Entry:
    """The manifest entry of the weights scalebench ships for ``name`` on ``channels``."""
    from scalebench.data.manifest import load_manifest

    if channels not in HUB_CHANNELS:
        raise ConfigError(f"denoiser '{name}': bundled weights exist for 1 or 3 channels, "
                          f"not {channels} (use pretrained 'none' or a weights file)")
    return load_manifest()[f"{name}_{HUB_CHANNELS[channels]}_bundled"]


@dataclass(frozen=True)
class Weights:
    """The weights a denoiser runs with: what ``pretrained`` resolved to."""

    source: str  # "none" (TV has no weights), "random", "bundled", "hub" or "file"
    path: Path | None = None  # the file loaded (None for "none" and "random")
    widths: dict | None = None  # architecture keyword arguments; None: deepinv's defaults

    @property
    def label(self) -> str:
        """What rows record in ``prov_weights``: the source, or the path of a user's file."""
        return str(self.path) if self.source == "file" else self.source


def _verified(entry: Entry) -> Path:
    from scalebench.data.fetch import destination, require_file

    # Only a copy verified against the manifest (or accepted by `scalebench fetch
    # --allow-unverified`) is used.
    return require_file(entry, destination(entry))


def _bundled(name: str, channels: int) -> Weights:
    from scalebench.denoisers.bundled import load_record

    entry = bundled_weights_entry(name, channels)
    path = _verified(entry)
    return Weights("bundled", path, load_record(path.stem, path.parent)["architecture"]["widths"])


def resolve_weights(name: str, channels: int, pretrained: str) -> Weights:
    """The weights ``pretrained`` names (PRETRAINED_VALUES or a path) for ``name``.

    'auto' is 'hub' when deepinv's published file is in the torch hub cache, else 'bundled';
    rows record which one ran.
    """
    if name == "tv":
        return Weights("none")
    if pretrained == "none":
        return Weights("random")
    if pretrained == "bundled":
        return _bundled(name, channels)
    if pretrained in ("hub", "auto"):
        from scalebench.data.fetch import destination

        entry = hub_weights_entry(name, channels)
        if pretrained == "auto" and not destination(entry).is_file():
            return _bundled(name, channels)
        return Weights("hub", _verified(entry))
    path = Path(pretrained).expanduser()
    if not path.is_file():
        raise MissingFileError(
            f"denoiser '{name}': weights file not found: {path} (pretrained must be one of "
            f"{', '.join(PRETRAINED_VALUES)} or the path of an existing .pth file)"
        )
    return Weights("file", path)


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
        sha256, architecture = "", {"name": name, "iterations": TV_ITERATIONS}
    else:
        sha256 = file_digest(weights.path) if weights.path is not None \
            else _state_digest(model)
        widths = weights.widths if weights.widths is not None else DEFAULT_WIDTHS[name]
        architecture = {"name": name, "class": type(model).__name__, "widths": widths,
                        "parameters": sum(p.numel() for p in model.parameters())}
    return {"weights": weights.label, "weights_sha256": sha256,
            "denoiser_architecture": json.dumps(architecture, sort_keys=True)}


_warned_random: set[str] = set()


def warn_random_weights(name: str) -> None:
    """One warning per process and denoiser: quality figures of random weights mean nothing."""
    if name in _warned_random:
        return
    _warned_random.add(name)
    print(f"scalebench: warning: denoiser '{name}' runs with random weights (pretrained: "
          f"none): its quality figures (PSNR, SSIM) are meaningless, its cost figures are "
          f"not; use pretrained auto, bundled, hub or a weights file for quality",
          file=sys.stderr, flush=True)


def load_denoiser(name: str, channels: int, pretrained: str = "auto",
                  device: torch.device | str = "cpu",
                  seed: int = 0) -> tuple[nn.Module, dict[str, str]]:
    """An eval-mode denoiser called as ``denoiser(x, sigma)`` (random init is seeded) and the
    provenance of its weights (``weights_record``)."""
    import deepinv as dinv

    if name not in DENOISERS:
        raise ConfigError(f"unknown denoiser '{name}' (allowed: {', '.join(DENOISERS)})")
    weights = resolve_weights(name, channels, pretrained)
    torch.manual_seed(seed)
    if name == "tv":
        model = IndependentTV()
    else:
        architecture = dinv.models.DRUNet if name == "drunet" else dinv.models.DnCNN
        source = str(weights.path) if weights.path is not None else None
        try:
            model = architecture(in_channels=channels, out_channels=channels,
                                 pretrained=source, device=device, **(weights.widths or {}))
        except (RuntimeError, ValueError, OSError, EOFError, pickle.UnpicklingError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise MissingFileError(f"denoiser '{name}': cannot load weights {weights.path}: "
                                   f"{type(error).__name__}: {first_line}") from None
    # Inference only: no parameter needs a gradient (and deepinv's distributed tiling then
    # skips its gradient synchronisation).
    model = model.to(device).eval().requires_grad_(False)
    return model, weights_record(name, weights, model)


def build_denoiser(name: str, channels: int, pretrained: str = "none",
                   device: torch.device | str = "cpu", seed: int = 0) -> nn.Module:
    """An eval-mode denoiser called as ``denoiser(x, sigma)``; random init is seeded."""
    return load_denoiser(name, channels, pretrained, device, seed)[0]
