"""Tiles of the denoiser's input: one tiling rule for one process and for several ranks.

``tile_windows`` cuts each axis into cores of ``patch_size`` samples, each denoised inside a
window with ``overlap`` more samples on every side (starting on the network's downsampling
grid), so that a network whose receptive radius is at most ``overlap`` gives the untiled
result. ``TiledDenoiser`` applies it in one process, at most ``max_batch_size`` windows per
call. Across ranks, ``WindowTiling`` supplies the same tiles to deepinv's
``DistributedProcessing``, which runs each rank's tiles and sums the ranks' outputs with one
all-reduce (cores are disjoint, so that sum is exact), and ``BatchDealtProcessing`` deals
whole batches to the ranks instead of single tiles: a network's output for one window can
change in its last bits with the batch it runs in (CPU convolutions take another kernel for a
batch of one), so every tile must meet the same batch on any number of ranks for N ranks to
reproduce one process bit for bit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from deepinv.distributed.framework import DistributedProcessing
from deepinv.distributed.strategies import DistributedSignalStrategy
from torch import nn

from scalebench.denoisers.networks import SIZE_MULTIPLE
from scalebench.errors import ConfigError


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


# One (window_start, core_start, core_end) per spatial axis, as tile_windows gives.
Tile = tuple[tuple[int, int, int], ...]


def image_tiles(spatial: Sequence[int], patch_size: int, overlap: int,
                multiple: int = 1) -> tuple[list[int], list[Tile]]:
    """The window's size per axis and every tile of an image or volume, the last axis varying
    fastest (row-major)."""
    axes = [tile_windows(n, patch_size, overlap, multiple) for n in spatial]
    return ([window for window, _ in axes],
            list(itertools.product(*(starts for _, starts in axes))))


def dealt_tiles(num_tiles: int, batch_size: int, rank: int, world_size: int) -> list[int]:
    """The tiles of ``rank``: those of the batches b (``batch_size`` consecutive tiles each,
    the last one possibly shorter) with b mod world_size == rank, in order. ``batch_size`` 0
    deals single tiles (each rank then runs its share at once, in a batch whose size depends
    on the number of ranks)."""
    unit = dealing_unit(batch_size)
    return [i for i in range(num_tiles) if (i // unit) % world_size == rank]


class WindowTiling(DistributedSignalStrategy):
    """Windows of at least ``patch_size + 2 * overlap`` around cores of ``patch_size`` on every
    spatial axis, starting on multiples of ``multiple``."""

    def __init__(self, img_size: Sequence[int], patch_size: int, overlap: int,
                 multiple: int = 1) -> None:
        super().__init__(img_size)
        spatial = tuple(img_size[2:])
        self.window, self.tiles = image_tiles(spatial, patch_size, overlap, multiple)

    def get_num_patches(self) -> int:
        return len(self.tiles)

    def get_local_patches(self, x: torch.Tensor,
                          local_indices: list[int]) -> list[tuple[int, torch.Tensor]]:
        return [(i, x[(..., *(slice(axis[0], axis[0] + size)
                              for axis, size in zip(self.tiles[i], self.window, strict=True)))])
                for i in local_indices]

    def reduce_patches(self, out_tensor: torch.Tensor,
                       local_pairs: list[tuple[int, torch.Tensor]]) -> None:
        for i, tile in local_pairs:
            cores = tuple(slice(axis[1], axis[2]) for axis in self.tiles[i])
            inside = tuple(slice(axis[1] - axis[0], axis[2] - axis[0]) for axis in self.tiles[i])
            out_tensor[(..., *cores)] = tile[(..., *inside)]


class BatchDealtProcessing(DistributedProcessing):
    """deepinv's distributed processing with whole batches of ``max_batch_size`` tiles dealt
    round-robin to the ranks (``dealt_tiles``): each rank's consecutive chunks of
    ``max_batch_size`` tiles are then exactly the batches one process runs."""

    def _init_shape_and_strategy(self, img_size: Sequence[int]) -> None:
        super()._init_shape_and_strategy(img_size)
        self.local_indices = dealt_tiles(self.num_patches, self.max_batch_size or 0,
                                         self.ctx.rank, self.ctx.world_size)


def count_tiles(params: dict, image_shape: tuple[int, ...]) -> int:
    """Tiles the denoiser cuts an image of shape (C, *spatial) into (1 when untiled)."""
    spatial = tuple(image_shape[1:])
    if not is_tiled(spatial, params["patch_size"]):
        return 1
    counts = [len(tile_windows(n, params["patch_size"], params["overlap"])[1]) for n in spatial]
    return math.prod(counts)


def denoised_pixels(params: dict, image_shape: tuple[int, ...], ranks: int) -> int:
    """Pixels one denoiser call takes on one of ``ranks`` ranks: the image, or a batch of
    tile windows (the tiles split over the ranks with ``distribute_denoiser``)."""
    spatial = image_shape[1:]
    tiles = count_tiles(params, image_shape)
    if tiles == 1:
        return math.prod(spatial)
    if params["distribute_denoiser"]:
        tiles = math.ceil(tiles / ranks)
    batch = min(tiles, params["max_batch_size"] or tiles)
    window = [min(params["patch_size"] + 2 * params["overlap"], n) for n in spatial]
    return batch * math.prod(window)
