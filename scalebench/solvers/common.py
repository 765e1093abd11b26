"""Parameters and set-up shared by the solvers: device, denoiser, tiling, distribution,
compilation, profiler."""

from __future__ import annotations

import math
import time

import torch
from torch import nn

from scalebench.denoisers import (
    DENOISERS,
    SIZE_MULTIPLE,
    TiledDenoiser,
    check_input_size,
    dealt_batch_count,
    is_tiled,
    load_denoiser,
    tile_windows,
    warn_random_weights,
)
from scalebench.errors import ConfigError
from scalebench.params import Param
from scalebench.profiling import PROFILER_MODES

# Resources of one run under benchopt's submitit backend (``--parallel-config``): benchopt
# hands every ``slurm_*`` solver parameter to submitit, so resources can be swept like any
# parameter. Unset (null) ones fall back to the parallel config; other launchers ignore them.
SLURM_PARAMS = {
    "slurm_nodes": Param(None, int, minimum=1, nullable=True, doc="nodes of the run's job"),
    "slurm_ntasks_per_node": Param(None, int, minimum=1, nullable=True,
                                   doc="ranks per node of the run's job"),
    "slurm_gres": Param(None, str, nullable=True, doc="generic resources, e.g. 'gpu:4'"),
    "slurm_time": Param(None, str, nullable=True, doc="time limit of the run's job"),
}

# Windows per denoiser call by default: bounds the denoiser's memory to that of this many
# windows, whatever the image size (0 concatenates every window: memory grows with the image).
DEFAULT_BATCH = 4

DENOISER_PARAMS = {
    "denoiser": Param("tv", str, choices=DENOISERS, doc="denoiser architecture"),
    "pretrained": Param("auto", str, doc="'auto' (deepinv's published weights when in the "
                                         "torch hub cache, else 'bundled'), 'bundled' (the "
                                         "small networks scalebench ships), 'hub', 'none' "
                                         "(seeded random weights: cost only) or a .pth path"),
    "denoiser_sigma": Param(0.05, float, minimum=0.0, doc="noise level given to the denoiser"),
    "patch_size": Param(0, int, minimum=0, doc="tile core size in pixels; 0: no tiling"),
    "overlap": Param(0, int, minimum=0, doc="extra pixels around each tile core"),
    "max_batch_size": Param(DEFAULT_BATCH, int, minimum=0,
                            doc=f"windows per denoiser call (default {DEFAULT_BATCH}: the "
                                f"denoiser holds at most that many windows); 0: all at once"),
    "device": Param("auto", str, choices=("auto", "cpu", "cuda"), doc="auto: cuda if present"),
    "profiler": Param("light", str, choices=PROFILER_MODES, doc="profiling detail"),
    "max_iter": Param(20, int, minimum=1, doc="iterations of the loop"),
    "eval_every": Param(1, int, minimum=1, doc="evaluate every k-th iteration (the first "
                                               "and the last always)"),
    "seed": Param(0, int, minimum=0, doc="seed of random weights and of added noise"),
    "deterministic": Param(True, bool, doc="deterministic mode (scalebench.determinism)"),
    "num_threads": Param(0, int, minimum=0, doc="torch intra-op threads; 0: keep default"),
    "distribute_denoiser": Param(False, bool, doc="split the denoiser's tiles across ranks"),
    "compile": Param(False, bool, doc="run the denoiser through torch.compile (compile time "
                                      "reported apart)"),
    "save_estimate": Param(False, bool, doc="keep the initial and final estimates and the "
                                            "ground truth (scalebench.estimates)"),
    **SLURM_PARAMS,
}


def evaluations(params: dict) -> int:
    """Rows a run records: iterations 0, k, 2k, ... and always the last (k = eval_every)."""
    return math.ceil(params["max_iter"] / params["eval_every"]) + 1


def resolve_device(name: str) -> torch.device:
    """'auto' picks the first CUDA device when there is one; 'cuda' requires one."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' requested but no CUDA device is available "
                          "(allowed here: 'cpu' or 'auto')")
    return torch.device(name)


def check_denoiser_fits(params: dict, image_shape: tuple[int, ...]) -> None:
    """Raise ConfigError when the denoiser or the tiling cannot take an image of this shape."""
    check_input_size(params["denoiser"], tuple(image_shape[1:]), params["patch_size"],
                     params["overlap"])


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


def run_ranks(params: dict, default: int) -> int:
    """Ranks of a run: slurm_nodes x slurm_ntasks_per_node where given, else ``default``."""
    nodes, per_node = params.get("slurm_nodes"), params.get("slurm_ntasks_per_node")
    if nodes is None and per_node is None:
        return default
    return (nodes or 1) * (per_node or 1)


def check_distribution(params: dict, image_shape: tuple[int, ...], num_operators: int,
                       world_size: int) -> None:
    """Raise ConfigError when a rank would have no work or every rank the same work."""
    if world_size <= 1:
        return
    physics, tiles = params.get("distribute_physics", False), params["distribute_denoiser"]
    if not (physics or tiles):
        raise ConfigError(f"{world_size} ranks but neither distribute_physics nor "
                          f"distribute_denoiser is true: every rank would repeat the same work")
    if physics and num_operators < world_size:
        raise ConfigError(f"distribute_physics: {num_operators} operator(s) for {world_size} "
                          f"ranks leaves ranks without work (use at most {num_operators} ranks "
                          f"or more operators)")
    tile_count = count_tiles(params, image_shape)
    batches = dealt_batch_count(tile_count, params["max_batch_size"])
    if tiles and batches < world_size:
        raise ConfigError(f"distribute_denoiser: {tile_count} tile(s) in {batches} batch(es) "
                          f"of max_batch_size {params['max_batch_size']} for {world_size} "
                          f"ranks leaves ranks without work (lower patch_size or "
                          f"max_batch_size, or use fewer ranks)")


def make_denoiser(params: dict, image_shape: tuple[int, ...], device: torch.device,
                  context=None) -> nn.Module:
    """The configured denoiser with its tiling, split across ranks when distributed."""
    return make_denoiser_with_record(params, image_shape, device, context)[0]


def make_denoiser_with_record(params: dict, image_shape: tuple[int, ...], device: torch.device,
                              context=None) -> tuple[nn.Module, dict[str, str]]:
    """``make_denoiser`` and the provenance of its weights (denoisers.weights_record); warns
    once (on rank 0) when the weights are random."""
    model, record = load_denoiser(params["denoiser"], image_shape[0], params["pretrained"],
                                  device, params["seed"])
    if record["weights"] == "random" and getattr(context, "rank", 0) == 0:
        warn_random_weights(params["denoiser"])
    return _wrap(model, params, image_shape, context), record


def _wrap(model: nn.Module, params: dict, image_shape: tuple[int, ...], context) -> nn.Module:
    if params["compile"]:
        model = torch.compile(model, dynamic=False)
    if not params["distribute_denoiser"]:
        return TiledDenoiser(model, params["patch_size"], params["overlap"],
                             params["max_batch_size"], SIZE_MULTIPLE[params["denoiser"]])
    from scalebench.distributed.tiling import BatchDealtProcessing, WindowTiling

    patch = params["patch_size"] if is_tiled(tuple(image_shape[1:]), params["patch_size"]) \
        else max(image_shape[1:])
    strategy = WindowTiling((1, *image_shape), patch, params["overlap"],
                            SIZE_MULTIPLE[params["denoiser"]])
    return BatchDealtProcessing(context, model, strategy=strategy,
                                max_batch_size=params["max_batch_size"] or None)


def warm_up(denoiser: nn.Module, image_shape: tuple[int, ...], sigma: float,
            device: torch.device) -> float:
    """Run the denoiser once on an image-shaped input (compiles it); return the seconds."""
    start = time.perf_counter()
    with torch.no_grad():
        denoiser(torch.zeros((1, *image_shape), device=device), sigma)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start
