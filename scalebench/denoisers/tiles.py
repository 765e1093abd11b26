"""Tiles of the denoiser's input, as arithmetic: one rule for one process and for several
ranks, and the checks of a config that read it (no torch).

``tile_windows`` cuts each axis into cores of ``tile_size`` samples, each denoised inside a
window with ``tile_overlap`` more samples on every side (starting on the network's downsampling
grid), so that a network whose receptive radius is at most ``tile_overlap`` gives the untiled
result. Across ranks, tiles are dealt in whole batches of ``tiles_per_batch`` consecutive
tiles (``dealt_tiles``): a network's output for one window can change in its last bits with
the batch it runs in, so every tile must meet the same batch on any number of ranks for N
ranks to reproduce one process bit for bit. scalebench.denoisers.tiling applies them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from scalebench.denoisers.catalog import DENOISERS, denoiser_spec
from scalebench.errors import ConfigError


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def tile_windows(length: int, tile_size: int, overlap: int,
                 multiple: int = 1) -> tuple[int, list[tuple[int, int, int]]]:
    """Window length and tiles along one axis, as (window_start, core_start, core_end).

    Cores of ``tile_size`` samples partition the axis; each is denoised inside a window that
    covers it and ``tile_overlap`` samples on each side. Window starts are multiples of
    ``multiple`` (a network that downsamples by 8 sees every window on the same grid as the
    whole image) and every window has one length, a multiple of ``multiple`` (or the whole
    axis if that is shorter); windows that would leave the image are shifted inward.
    """
    cores = [(start, min(start + tile_size, length)) for start in range(0, length, tile_size)]
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


def is_tiled(spatial: tuple[int, ...], tile_size: int) -> bool:
    """Whether an image of this size is cut into tiles (tile_size 0 or >= the image: no)."""
    return 0 < tile_size < max(spatial)


def check_input_size(name: str, spatial: tuple[int, ...], tile_size: int, overlap: int) -> None:
    """Raise ConfigError when ``name`` cannot take the image (or its tiles) of this size."""
    spec = denoiser_spec(name)
    multiple = spec.size_multiple
    tiled = is_tiled(spatial, tile_size)
    if len(spatial) == 3 and not spec.volumes:
        takes = ", ".join(f"'{n}'" for n, s in DENOISERS.items() if s.volumes)
        raise ConfigError(f"denoiser '{name}' takes 2D images only and the data is a 3D volume "
                          f"({'x'.join(map(str, spatial))}): use a denoiser that takes "
                          f"volumes ({takes})")
    if len(spatial) == 3 and tiled:
        raise ConfigError(f"tiling (tile_size={tile_size}) supports 2D images only, the data "
                          f"is a 3D volume: use tile_size 0")
    sides = [tile_windows(n, tile_size, overlap, multiple)[0] if tiled else n
             for n in spatial]
    if any(side % multiple for side in sides):
        what = "windows (tile_size + 2 * tile_overlap, or the image side)" if tiled \
            else "image sides"
        raise ConfigError(
            f"denoiser '{name}' needs {what} divisible by {multiple}, got inputs of "
            f"{'x'.join(map(str, sides))} (image {'x'.join(map(str, spatial))}, "
            f"tile_size={tile_size}, tile_overlap={overlap})"
        )


# One (window_start, core_start, core_end) per spatial axis, as tile_windows gives.
Tile = tuple[tuple[int, int, int], ...]


def image_tiles(spatial: Sequence[int], tile_size: int, overlap: int,
                multiple: int = 1) -> tuple[list[int], list[Tile]]:
    """The window's size per axis and every tile of an image or volume, the last axis varying
    fastest (row-major)."""
    axes = [tile_windows(n, tile_size, overlap, multiple) for n in spatial]
    return ([window for window, _ in axes],
            list(itertools.product(*(starts for _, starts in axes))))


def dealt_tiles(num_tiles: int, batch_size: int, rank: int, world_size: int) -> list[int]:
    """The tiles of ``rank``: those of the batches b (``batch_size`` consecutive tiles each,
    the last one possibly shorter) with b mod world_size == rank, in order. ``batch_size`` 0
    deals single tiles (each rank then runs its share at once, in a batch whose size depends
    on the number of ranks)."""
    unit = dealing_unit(batch_size)
    return [i for i in range(num_tiles) if (i // unit) % world_size == rank]


def count_tiles(params: dict, image_shape: tuple[int, ...]) -> int:
    """Tiles the denoiser cuts an image of shape (C, *spatial) into (1 when untiled)."""
    spatial = tuple(image_shape[1:])
    if not is_tiled(spatial, params["tile_size"]):
        return 1
    counts = [len(tile_windows(n, params["tile_size"], params["tile_overlap"])[1]) for n in spatial]
    return math.prod(counts)


def rank_tiles(params: dict, image_shape: tuple[int, ...], ranks: int) -> tuple[int, int]:
    """(tiles, pixels of one tile window) one of ``ranks`` ranks denoises in a pass over the
    image: (1, the image's pixels) untiled; its share of the tiles with
    ``distribute_denoiser``, else every tile."""
    spatial = image_shape[1:]
    tiles = count_tiles(params, image_shape)
    if tiles == 1:
        return 1, math.prod(spatial)
    if params["distribute_denoiser"]:
        tiles = math.ceil(tiles / ranks)
    window = [min(params["tile_size"] + 2 * params["tile_overlap"], n) for n in spatial]
    return tiles, math.prod(window)


def denoised_pixels(params: dict, image_shape: tuple[int, ...], ranks: int) -> int:
    """Pixels one denoiser call takes on one of ``ranks`` ranks: the image, or a batch of
    tile windows: what a call's memory grows with."""
    tiles, window = rank_tiles(params, image_shape, ranks)
    return min(tiles, params["tiles_per_batch"] or tiles) * window


def pass_pixels(params: dict, image_shape: tuple[int, ...], ranks: int) -> int:
    """Pixels one of ``ranks`` ranks denoises in a pass over the image (one denoising step):
    the image, or all its tile windows, halos included: what the step's time grows with."""
    tiles, window = rank_tiles(params, image_shape, ranks)
    return tiles * window


def check_denoiser_fits(params: dict, image_shape: tuple[int, ...]) -> None:
    """Raise ConfigError when the denoiser or the tiling cannot take an image of this shape."""
    check_input_size(params["denoiser"], tuple(image_shape[1:]), params["tile_size"],
                     params["tile_overlap"])
