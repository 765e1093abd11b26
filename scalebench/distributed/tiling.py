"""The benchmark's tiling as a deepinv distribution strategy.

deepinv's ``DistributedProcessing`` hands tiles round-robin to the ranks, runs the network on
each rank's tiles in batches and sums the ranks' outputs with one all-reduce. Tiles write
disjoint cores into a zero image, so that sum is exact. ``WindowTiling`` supplies the tiles:
the cores and windows of ``scalebench.denoisers.tile_windows``, the same ones the one-process
``TiledDenoiser`` uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from deepinv.distributed.strategies import DistributedSignalStrategy

from scalebench.denoisers import tile_windows

Tile = tuple[tuple[int, int, int], tuple[int, int, int]]  # (rows, cols) as tile_windows gives


def image_tiles(spatial: Sequence[int], patch_size: int, overlap: int,
                multiple: int = 1) -> tuple[list[int], list[Tile]]:
    """The window's size and every tile of a 2D image, row-major."""
    (height, rows), (width, cols) = (tile_windows(n, patch_size, overlap, multiple)
                                     for n in spatial)
    return [height, width], [(r, c) for r in rows for c in cols]


class WindowTiling(DistributedSignalStrategy):
    """Windows of at least ``patch_size + 2 * overlap`` around cores of ``patch_size``, starting
    on multiples of ``multiple`` (2D images)."""

    def __init__(self, img_size: Sequence[int], patch_size: int, overlap: int,
                 multiple: int = 1) -> None:
        super().__init__(img_size)
        spatial = tuple(img_size[2:])
        if len(spatial) != 2:
            raise ValueError(f"tiling supports 2D images, got spatial shape {spatial}")
        self.window, self.tiles = image_tiles(spatial, patch_size, overlap, multiple)

    def get_num_patches(self) -> int:
        return len(self.tiles)

    def get_local_patches(self, x: torch.Tensor,
                          local_indices: list[int]) -> list[tuple[int, torch.Tensor]]:
        height, width = self.window
        return [(i, x[..., r[0]:r[0] + height, c[0]:c[0] + width])
                for i, (r, c) in ((i, self.tiles[i]) for i in local_indices)]

    def reduce_patches(self, out_tensor: torch.Tensor,
                       local_pairs: list[tuple[int, torch.Tensor]]) -> None:
        for i, tile in local_pairs:
            r, c = self.tiles[i]
            out_tensor[..., r[1]:r[2], c[1]:c[2]] = tile[
                ..., r[1] - r[0]:r[2] - r[0], c[1] - c[0]:c[2] - c[0]]
