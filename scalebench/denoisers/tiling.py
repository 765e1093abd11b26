"""Tiled application of a denoiser (the tiles of scalebench.denoisers.tiles): in one process
(``TiledDenoiser``, at most ``tiles_per_batch`` windows per call), and across ranks as a deepinv
distribution strategy: ``WindowTiling`` supplies the tiles to deepinv's
``DistributedProcessing``, which runs each rank's tiles and sums the ranks' outputs with one
all-reduce (cores are disjoint, so that sum is exact); ``BatchDealtProcessing`` deals whole
batches to the ranks instead of single tiles.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from deepinv.distributed.framework import DistributedProcessing
from deepinv.distributed.strategies import DistributedSignalStrategy
from torch import nn

from scalebench.denoisers.tiles import dealt_tiles, image_tiles, is_tiled, tile_windows


class TiledDenoiser(nn.Module):
    """Applies a denoiser tile by tile to bound memory; ``tile_size=0`` means no tiling.

    Each tile's core is taken from a window with at least ``tile_overlap`` extra samples on every
    side, starting on multiples of ``multiple`` (the network's downsampling factor); for a
    network whose receptive radius is at most ``tile_overlap`` the result then equals the untiled
    one. At most ``tiles_per_batch`` windows (0: all at once) go through the network per call.
    """

    def __init__(self, denoiser: nn.Module, tile_size: int = 0, overlap: int = 0,
                 tiles_per_batch: int = 0, multiple: int = 1) -> None:
        super().__init__()
        self.denoiser = denoiser
        self.tile_size = tile_size
        self.overlap = overlap
        self.tiles_per_batch = tiles_per_batch
        self.multiple = multiple

    def forward(self, x: torch.Tensor, sigma: float) -> torch.Tensor:
        spatial = x.shape[2:]
        if not is_tiled(tuple(spatial), self.tile_size):
            return self.denoiser(x, sigma)
        if len(spatial) != 2:
            raise ValueError(f"tiling supports 2D images, got spatial shape {tuple(spatial)}")
        (height, rows), (width, cols) = (
            tile_windows(n, self.tile_size, self.overlap, self.multiple) for n in spatial)
        tiles = [(r, c) for r in rows for c in cols]
        batch = self.tiles_per_batch or len(tiles)
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


class WindowTiling(DistributedSignalStrategy):
    """Windows of at least ``tile_size + 2 * overlap`` around cores of ``tile_size`` on every
    spatial axis, starting on multiples of ``multiple``."""

    def __init__(self, img_size: Sequence[int], tile_size: int, overlap: int,
                 multiple: int = 1) -> None:
        super().__init__(img_size)
        spatial = tuple(img_size[2:])
        self.window, self.tiles = image_tiles(spatial, tile_size, overlap, multiple)

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
    """deepinv's distributed processing with whole batches of ``tiles_per_batch`` tiles dealt
    round-robin to the ranks (``dealt_tiles``): each rank's consecutive chunks of
    ``tiles_per_batch`` tiles are then exactly the batches one process runs."""

    def _init_shape_and_strategy(self, img_size: Sequence[int]) -> None:
        super()._init_shape_and_strategy(img_size)
        # deepinv's name for the tiles per batch
        self.local_indices = dealt_tiles(self.num_patches, self.max_batch_size or 0,
                                         self.ctx.rank, self.ctx.world_size)
