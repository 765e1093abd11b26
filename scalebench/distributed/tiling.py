"""The benchmark's tiling as a deepinv distribution strategy.

deepinv's ``DistributedProcessing`` runs the network on each rank's tiles in batches and sums
the ranks' outputs with one all-reduce. Tiles write disjoint cores into a zero image, so that
sum is exact. ``WindowTiling`` supplies the tiles: the cores and windows of
``scalebench.denoisers.tile_windows``, the same ones the one-process ``TiledDenoiser`` uses,
along every spatial axis (2D images and 3D volumes).

``BatchDealtProcessing`` deals whole batches to the ranks instead of single tiles: a network's
output for one window can change in its last bits with the batch it runs in (CPU convolutions
take another kernel for a batch of one), so every tile must meet the same batch on any number
of ranks for N ranks to reproduce one process bit for bit.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from deepinv.distributed.framework import DistributedProcessing
from deepinv.distributed.strategies import DistributedSignalStrategy

from scalebench.denoisers import dealing_unit, tile_windows

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
