"""Denoisers (learned and classical) and their tiled application in one process."""

from __future__ import annotations

import hashlib
import json
import math
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
# 'bundled': the small networks scalebench trains and ships (scalebench.bundled); 'hub':
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
    from scalebench.bundled import load_record

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


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def tile_windows(length: int, patch_size: int, overlap: int,
                 multiple: int = 1) -> tuple[int, list[tuple[int, int, int]]]:
    """Window length and tiles along one axis, as (window_start, core_start, core_end).

    Cores of ``patch_size`` samples partition the axis; each is denoised inside a window that
    covers it and ``overlap`` samples on each side. Window starts are multiples of
    ``multiple`` (a network that downsamples by 8 sees every window on the same grid as the
    whole image) and every window has one length, a multiple of ``multiple`` (or the whole
    axis if that is shorter); windows that would leave the image are shifted inward.
    """
    cores = [(start, min(start + patch_size, length)) for start in range(0, length, patch_size)]
    starts = [max(start - overlap, 0) // multiple * multiple for start, _ in cores]
    span = max(min(end + overlap, length) - first for first, (_, end) in zip(starts, cores,
                                                                             strict=True))
    window = min(_round_up(span, multiple), length)
    return window, [(min(first, length - window), start, end)
                    for first, (start, end) in zip(starts, cores, strict=True)]


def dealing_unit(batch_size: int) -> int:
    """Tiles per unit dealt to a rank: a whole batch of ``batch_size`` consecutive tiles;
    ``batch_size`` 0 (each rank's share at once) deals single tiles."""
    return batch_size if batch_size > 0 else 1


def dealt_batch_count(num_tiles: int, batch_size: int) -> int:
    """The units (dealing_unit) ``num_tiles`` tiles are dealt to ranks in; the last one may
    be shorter."""
    return math.ceil(num_tiles / dealing_unit(batch_size))


def is_tiled(spatial: tuple[int, ...], patch_size: int) -> bool:
    """Whether an image of this size is cut into tiles (patch_size 0 or >= the image: no)."""
    return 0 < patch_size < max(spatial)


def check_input_size(name: str, spatial: tuple[int, ...], patch_size: int, overlap: int) -> None:
    """Raise ConfigError when ``name`` cannot take the image (or its tiles) of this size."""
    multiple = SIZE_MULTIPLE[name]
    tiled = is_tiled(spatial, patch_size)
    if len(spatial) == 3 and name != "tv":
        raise ConfigError(f"denoiser '{name}' is a 2D network and the data is a 3D volume "
                          f"({'x'.join(map(str, spatial))}): use denoiser 'tv'")
    if len(spatial) == 3 and tiled:
        raise ConfigError(f"tiling (patch_size={patch_size}) supports 2D images only, the data "
                          f"is a 3D volume: use patch_size 0")
    sides = [tile_windows(n, patch_size, overlap, multiple)[0] if tiled else n
             for n in spatial]
    if any(side % multiple for side in sides):
        what = "windows (patch_size + 2 * overlap, or the image side)" if tiled \
            else "image sides"
        raise ConfigError(
            f"denoiser '{name}' needs {what} divisible by {multiple}, got inputs of "
            f"{'x'.join(map(str, sides))} (image {'x'.join(map(str, spatial))}, "
            f"patch_size={patch_size}, overlap={overlap})"
        )


class TiledDenoiser(nn.Module):
    """Applies a denoiser tile by tile to bound memory; ``patch_size=0`` means no tiling.

    Each tile's core is taken from a window with at least ``overlap`` extra samples on every
    side, starting on multiples of ``multiple`` (the network's downsampling factor); for a
    network whose receptive radius is at most ``overlap`` the result then equals the untiled
    one. At most ``max_batch_size`` windows (0: all at once) go through the network per call.
    """

    def __init__(self, denoiser: nn.Module, patch_size: int = 0, overlap: int = 0,
                 max_batch_size: int = 0, multiple: int = 1) -> None:
        super().__init__()
        self.denoiser = denoiser
        self.patch_size = patch_size
        self.overlap = overlap
        self.max_batch_size = max_batch_size
        self.multiple = multiple

    def forward(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        spatial = x.shape[2:]
        if not is_tiled(tuple(spatial), self.patch_size):
            return self.denoiser(x, sigma)
        if len(spatial) != 2:
            raise ValueError(f"tiling supports 2D images, got spatial shape {tuple(spatial)}")
        (height, rows), (width, cols) = (
            tile_windows(n, self.patch_size, self.overlap, self.multiple) for n in spatial)
        tiles = [(r, c) for r in rows for c in cols]
        batch = self.max_batch_size or len(tiles)
        out = torch.empty_like(x)
        for first in range(0, len(tiles), batch):
            chunk = tiles[first:first + batch]
            crops = torch.cat([x[..., r[0]:r[0] + height, c[0]:c[0] + width]
                               for r, c in chunk])
            denoised = self.denoiser(crops, sigma).split(x.shape[0])
            for (r, c), tile in zip(chunk, denoised, strict=True):
                out[..., r[1]:r[2], c[1]:c[2]] = tile[
                    ..., r[1] - r[0]:r[2] - r[0], c[1] - c[0]:c[2] - c[0]
                ]
        return out
