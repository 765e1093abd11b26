"""The configured denoiser of a run: the network with its weights, tiled in one process or
its tiles dealt to the ranks, compiled on request."""

from __future__ import annotations

import time

import torch
from torch import nn

from scalebench.denoisers.catalog import denoiser_spec, warn_random_weights
from scalebench.denoisers.networks import load_denoiser
from scalebench.denoisers.tiles import is_tiled
from scalebench.denoisers.tiling import BatchDealtProcessing, TiledDenoiser, WindowTiling


def make_denoiser(params: dict, image_shape: tuple[int, ...], device: torch.device,
                  context=None) -> nn.Module:
    """The configured denoiser with its tiling, split across ranks when distributed."""
    return make_denoiser_with_record(params, image_shape, device, context)[0]


def make_denoiser_with_record(params: dict, image_shape: tuple[int, ...], device: torch.device,
                              context=None) -> tuple[nn.Module, dict[str, str]]:
    """``make_denoiser`` and the provenance of its weights (networks.weights_record); warns once
    (on rank 0) when the weights are random."""
    model, record = load_denoiser(params["denoiser"], image_shape[0], params["pretrained"],
                                  device, params["seed"])
    if record["weights"] == "random" and getattr(context, "rank", 0) == 0:
        warn_random_weights(params["denoiser"])
    return _wrap(model, params, image_shape, context), record


def _wrap(model: nn.Module, params: dict, image_shape: tuple[int, ...], context) -> nn.Module:
    multiple = denoiser_spec(params["denoiser"]).size_multiple
    if params["compile"]:
        model = torch.compile(model, dynamic=False)
    if not params["distribute_denoiser"]:
        return TiledDenoiser(model, params["tile_size"], params["tile_overlap"],
                             params["tiles_per_batch"], multiple)
    patch = params["tile_size"] if is_tiled(tuple(image_shape[1:]), params["tile_size"]) \
        else max(image_shape[1:])
    strategy = WindowTiling((1, *image_shape), patch, params["tile_overlap"], multiple)
    return BatchDealtProcessing(context, model, strategy=strategy,
                                max_batch_size=params["tiles_per_batch"] or None)


def warm_up(denoiser: nn.Module, image_shape: tuple[int, ...], sigma: float,
            device: torch.device) -> float:
    """Run the denoiser once on an image-shaped input (compiles it); return the seconds."""
    start = time.perf_counter()
    with torch.no_grad():
        denoiser(torch.zeros((1, *image_shape), device=device), sigma)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start
