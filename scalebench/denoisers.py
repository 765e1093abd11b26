"""Denoisers (learned and classical) and their tiled application in one process."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from torch import nn

from scalebench.errors import ConfigError, MissingFileError

DENOISERS = ("tv", "drunet", "dncnn")
TV_ITERATIONS = 50  # fixed so that a TV step costs the same in every run
# Files deepinv publishes for each (architecture, channels); looked up in the torch hub cache.
HUB_WEIGHTS = {
    ("drunet", 1): "drunet_deepinv_gray_finetune_26k.pth",
    ("drunet", 3): "drunet_deepinv_color_finetune_22k.pth",
    ("dncnn", 1): "dncnn_sigma2_gray.pth",
    ("dncnn", 3): "dncnn_sigma2_color.pth",
}
SIZE_MULTIPLE = {"drunet": 8, "dncnn": 1, "tv": 1}  # DRUNet downsamples three times


def resolve_weights(name: str, channels: int, pretrained: str) -> Path | None:
    """Weights file for ``pretrained``: 'none' (random init), 'hub' or a path; None for random."""
    if pretrained == "none" or name == "tv":
        return None
    if pretrained == "hub":
        path = Path(torch.hub.get_dir()) / "checkpoints" / HUB_WEIGHTS[(name, channels)]
    else:
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
        model = dinv.models.TVDenoiser(n_it_max=TV_ITERATIONS)
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


def tile_windows(length: int, patch_size: int, overlap: int) -> list[tuple[int, int, int]]:
    """Tiles along one axis as (window_start, core_start, core_end).

    Cores of ``patch_size`` samples partition the axis; each is denoised inside a window of
    ``patch_size + 2 * overlap`` samples (the whole axis if shorter), shifted inward at the
    borders so that every window has the same length and never leaves the image.
    """
    window = min(patch_size + 2 * overlap, length)
    tiles = []
    for core_start in range(0, length, patch_size):
        window_start = min(max(core_start - overlap, 0), length - window)
        tiles.append((window_start, core_start, min(core_start + patch_size, length)))
    return tiles


def check_input_size(name: str, spatial: tuple[int, ...], patch_size: int, overlap: int) -> None:
    """Raise ConfigError when ``name`` cannot take the image (or its tiles) of this size."""
    multiple = SIZE_MULTIPLE[name]
    tiled = 0 < patch_size < max(spatial)
    if len(spatial) == 3 and name != "tv":
        raise ConfigError(f"denoiser '{name}' is a 2D network and the data is a 3D volume "
                          f"({'x'.join(map(str, spatial))}): use denoiser 'tv'")
    if len(spatial) == 3 and tiled:
        raise ConfigError(f"tiling (patch_size={patch_size}) supports 2D images only, the data "
                          f"is a 3D volume: use patch_size 0")
    sides = [min(patch_size + 2 * overlap, n) if tiled else n for n in spatial]
    if any(side % multiple for side in sides):
        what = "patch_size + 2 * overlap (or the image side)" if tiled else "image sides"
        raise ConfigError(
            f"denoiser '{name}' needs {what} divisible by {multiple}, got inputs of "
            f"{'x'.join(map(str, sides))} (image {'x'.join(map(str, spatial))}, "
            f"patch_size={patch_size}, overlap={overlap})"
        )


class TiledDenoiser(nn.Module):
    """Applies a denoiser tile by tile to bound memory; ``patch_size=0`` means no tiling.

    Each tile's core is taken from a window with ``overlap`` extra samples on every side, so
    for a network whose receptive radius is at most ``overlap`` the result equals the untiled
    one. At most ``max_batch_size`` windows (0: all) go through the network at once.
    """

    def __init__(self, denoiser: nn.Module, patch_size: int = 0, overlap: int = 0,
                 max_batch_size: int = 0) -> None:
        super().__init__()
        self.denoiser = denoiser
        self.patch_size = patch_size
        self.overlap = overlap
        self.max_batch_size = max_batch_size

    def forward(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        spatial = x.shape[2:]
        if self.patch_size == 0 or self.patch_size >= max(spatial):
            return self.denoiser(x, sigma)
        if len(spatial) != 2:
            raise ValueError(f"tiling supports 2D images, got spatial shape {tuple(spatial)}")
        rows, cols = (tile_windows(n, self.patch_size, self.overlap) for n in spatial)
        window = [min(self.patch_size + 2 * self.overlap, n) for n in spatial]
        tiles = [(r, c) for r in rows for c in cols]
        batch = self.max_batch_size or len(tiles)
        out = torch.empty_like(x)
        for first in range(0, len(tiles), batch):
            chunk = tiles[first:first + batch]
            crops = torch.cat([
                x[..., r[0]:r[0] + window[0], c[0]:c[0] + window[1]] for r, c in chunk
            ])
            denoised = self.denoiser(crops, sigma).split(x.shape[0])
            for (r, c), tile in zip(chunk, denoised, strict=True):
                out[..., r[1]:r[2], c[1]:c[2]] = tile[
                    ..., r[1] - r[0]:r[2] - r[0], c[1] - c[0]:c[2] - c[0]
                ]
        return out
