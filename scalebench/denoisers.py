"""Denoisers (learned and classical) and their tiled application in one process."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from scalebench.errors import ConfigError, MissingFileError

if TYPE_CHECKING:
    from scalebench.data.manifest import Entry

DENOISERS = ("tv", "drunet", "dncnn")
TV_ITERATIONS = 50  # exactly this many per call (IndependentTV): every TV step costs the same
# deepinv publishes weights per architecture for grey and colour images: the manifest's
# entries "<architecture>_<gray|color>" (scalebench/data/manifest.toml).
HUB_CHANNELS = {1: "gray", 3: "color"}
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


def resolve_weights(name: str, channels: int, pretrained: str) -> Path | None:
    """Weights file for ``pretrained``: 'none' (random init), 'hub' or a path; None for random."""
    if pretrained == "none" or name == "tv":
        return None
    if pretrained == "hub":
        from scalebench.data.fetch import destination, require_file

        entry = hub_weights_entry(name, channels)
        # Only a copy verified against the manifest (or accepted by `scalebench fetch
        # --allow-unverified`) is used.
        return require_file(entry, destination(entry))
    path = Path(pretrained).expanduser()
    if not path.is_file():
        raise MissingFileError(
            f"denoiser '{name}': weights file not found: {path} (pretrained must be 'none', "
            f"'hub' with the file in the torch hub cache, or the path of an existing .pth file)"
        )
    return path


def build_denoiser(name: str, channels: int, pretrained: str = "none",
                   device: torch.device | str = "cpu", seed: int = 0) -> nn.Module:
    """An eval-mode denoiser called as ``denoiser(x, sigma)``; random init is seeded."""
    import deepinv as dinv

    if name not in DENOISERS:
        raise ConfigError(f"unknown denoiser '{name}' (allowed: {', '.join(DENOISERS)})")
    weights = resolve_weights(name, channels, pretrained)
    source = str(weights) if weights is not None else None
    torch.manual_seed(seed)
    if name == "tv":
        model = IndependentTV()
    else:
        architecture = dinv.models.DRUNet if name == "drunet" else dinv.models.DnCNN
        try:
            model = architecture(in_channels=channels, out_channels=channels,
                                 pretrained=source, device=device)
        except (RuntimeError, ValueError, OSError, EOFError, pickle.UnpicklingError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise MissingFileError(f"denoiser '{name}': cannot load weights {weights}: "
                                   f"{type(error).__name__}: {first_line}") from None
    # Inference only: no parameter needs a gradient (and deepinv's distributed tiling then
    # skips its gradient synchronisation).
    return model.to(device).eval().requires_grad_(False)


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
