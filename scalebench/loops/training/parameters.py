"""The training solver's parameters and the checks made before anything runs.

``check_training`` needs the dataset (its parameters and image shape) and the number of ranks;
``scalebench run`` / ``validate`` apply it to every combination of a grid, and the solver
applies it again when benchopt hands it a problem.
"""

from __future__ import annotations

from scalebench.denoisers.catalog import DENOISERS
from scalebench.denoisers.tiles import dealt_batch_count, image_tiles, is_tiled, tile_windows
from scalebench.errors import ConfigError
from scalebench.loops.inference_parameters import RUN_PARAMS, SLURM_PARAMS
from scalebench.loops.spec import SolverSpec
from scalebench.param_spec import Param
from scalebench.problems.spec import ProblemSpec

CHECKPOINTING = ("none", "stage", "tile_batch", "auto")
DISTRIBUTIONS = ("none", "data", "spatial")
OPTIMIZERS = ("adam", "sgd")
NETWORKS = ("dncnn", "drunet")

TRAINING_PARAMS = {
    "num_stages": Param(4, int, minimum=1, doc="K: unrolled proximal-gradient stages"),
    "denoiser": Param("dncnn", str, choices=NETWORKS, doc="prior network of every stage"),
    "denoiser_width": Param(16, int, minimum=1, doc="channels of the first level (DnCNN: "
                                                    "every layer)"),
    "denoiser_depth": Param(4, int, minimum=2, doc="DnCNN: convolution layers; DRUNet: "
                                                   "residual blocks per level"),
    "patch_size": Param(32, int, minimum=16, doc="side of a training patch (pixels/voxels)"),
    "batch_size": Param(4, int, minimum=1, doc="patches per step over all ranks"),
    "lr": Param(3e-4, float, minimum=0.0, doc="learning rate of the network's weights"),
    "lr_stage": Param(3e-3, float, minimum=0.0, doc="learning rate of step sizes and "
                                                    "strengths"),
    "init_step_size": Param(None, float, minimum=0.0, nullable=True,
                            doc="initial step size of every stage; null: 1 / ||A||^2"),
    "init_sigma": Param(0.05, float, minimum=1e-6, doc="initial denoiser strength (noise "
                                                       "level) of every stage"),
    "clip_grad_norm": Param(0.0, float, minimum=0.0, doc="largest gradient norm; 0: none"),
    "optimizer": Param("adam", str, choices=OPTIMIZERS, doc="optimizer of every parameter"),
    "eval_every": Param(5, int, minimum=1, doc="validation PSNR/SSIM every this many steps"),
    "checkpointing": Param("none", str, choices=CHECKPOINTING,
                           doc="activation checkpointing: none, per stage, per tile batch, "
                               "or auto from memory_budget_mib"),
    "memory_budget_mib": Param(0.0, float, minimum=0.0,
                               doc="activation memory allowed to 'auto' checkpointing, MiB"),
    "distribution": Param("none", str, choices=DISTRIBUTIONS,
                          doc="split across ranks: data (the batch) or spatial (the tiles)"),
    "tile_size": Param(0, int, minimum=0, doc="tile core of the network's input; 0: none"),
    "tile_overlap": Param(0, int, minimum=0, doc="extra pixels around each tile core"),
    "tiles_per_batch": Param(0, int, minimum=0, doc="tiles per network call; 0: all"),
    "max_iter": RUN_PARAMS["max_iter"],
    "device": RUN_PARAMS["device"],
    "profiler": RUN_PARAMS["profiler"],
    "seed": RUN_PARAMS["seed"],
    "deterministic": RUN_PARAMS["deterministic"],
    "num_threads": RUN_PARAMS["num_threads"],
    **SLURM_PARAMS,
}

# The training benchmark's solver, as configs name it (it runs no inference denoiser).
UNROLLED_PGD = SolverSpec("unrolled_pgd", "supervised training step of an unrolled network",
                          TRAINING_PARAMS, uses_operator=True, uses_denoiser=False,
                          work_parameters={"batch_size": 1, "patch_size": 2})


def patch_shape(spec: ProblemSpec, values: dict, patch_size: int) -> tuple[int, ...]:
    """(C, *spatial) of a training patch; the problem rebuilt at the patch size must exist."""
    image = spec.image_shape(**values)
    if any(patch_size > side for side in image[1:]):
        raise ConfigError(f"patch_size {patch_size} is larger than the image "
                          f"({'x'.join(map(str, image[1:]))}); use at most {min(image[1:])}")
    try:
        return spec.image_shape(**{**values, "image_size": patch_size})
    except ValueError as error:
        raise ConfigError(f"patch_size {patch_size}: {error}") from None


def training_rows(params: dict) -> int:
    """Rows a training run records: the untrained model and every step (eval_every spaces
    only the validation figures)."""
    return params["max_iter"] + 1


def tile_count(params: dict, spatial: tuple[int, ...]) -> int:
    """Tiles of the network's input (1 when untiled)."""
    if not is_tiled(spatial, params["tile_size"]):
        return 1
    return len(image_tiles(spatial, params["tile_size"], params["tile_overlap"],
                           DENOISERS[params["denoiser"]].size_multiple)[1])


def check_training(params: dict, spec: ProblemSpec, values: dict, world_size: int) -> None:
    """Raise ConfigError naming the first parameter that cannot work with this dataset."""
    spatial = patch_shape(spec, values, params["patch_size"])[1:]
    tiled = is_tiled(spatial, params["tile_size"])
    multiple = DENOISERS[params["denoiser"]].size_multiple
    window = [tile_windows(n, params["tile_size"], params["tile_overlap"], multiple)[0]
              if tiled else n for n in spatial]
    if any(side % multiple for side in window):
        raise ConfigError(f"denoiser '{params['denoiser']}' needs inputs divisible by "
                          f"{multiple}, got {'x'.join(map(str, window))} (patch_size "
                          f"{params['patch_size']}, tile_size {params['tile_size']}, "
                          f"tile_overlap {params['tile_overlap']})")
    if params["checkpointing"] == "tile_batch" and not tiled:
        raise ConfigError("checkpointing 'tile_batch' needs tiles: set tile_size between 1 "
                          f"and the patch side ({max(spatial)} excluded)")
    if params["checkpointing"] == "auto" and params["memory_budget_mib"] <= 0:
        raise ConfigError("checkpointing 'auto' needs memory_budget_mib > 0 (the activation "
                          "memory allowed, MiB)")
    _check_ranks(params, spatial, world_size)


def _check_ranks(params: dict, spatial: tuple[int, ...], world_size: int) -> None:
    mode = params["distribution"]
    if world_size > 1 and mode == "none":
        raise ConfigError(f"{world_size} ranks but distribution is 'none': every rank would "
                          f"repeat the same step (use 'data' or 'spatial')")
    if mode == "data" and params["batch_size"] % world_size:
        raise ConfigError(f"distribution 'data': batch_size {params['batch_size']} is not "
                          f"divisible by {world_size} ranks (use a multiple of {world_size})")
    tiles = tile_count(params, spatial)
    batches = dealt_batch_count(tiles, params["tiles_per_batch"])
    if mode == "spatial" and batches < world_size:
        raise ConfigError(f"distribution 'spatial': {tiles} tile(s) in {batches} batch(es) of "
                          f"tiles_per_batch {params['tiles_per_batch']} for {world_size} ranks "
                          f"leaves ranks without work (set or lower tile_size or "
                          f"tiles_per_batch, or use fewer ranks)")
