"""Parameters and set-up shared by the solvers: device, denoiser, tiling, profiler."""

from __future__ import annotations

import torch

from scalebench.denoisers import DENOISERS, TiledDenoiser, build_denoiser, check_input_size
from scalebench.errors import ConfigError
from scalebench.params import Param
from scalebench.profiling import PROFILER_MODES

DENOISER_PARAMS = {
    "denoiser": Param("tv", str, choices=DENOISERS, doc="denoiser architecture"),
    "pretrained": Param("none", str, doc="'none' (random init), 'hub' or a .pth file path"),
    "denoiser_sigma": Param(0.05, float, minimum=0.0, doc="noise level given to the denoiser"),
    "patch_size": Param(0, int, minimum=0, doc="tile core size in pixels; 0: no tiling"),
    "overlap": Param(0, int, minimum=0, doc="extra pixels around each tile core"),
    "max_batch_size": Param(0, int, minimum=0, doc="tiles per denoiser call; 0: all"),
    "device": Param("auto", str, choices=("auto", "cpu", "cuda"), doc="auto: cuda if present"),
    "profiler": Param("light", str, choices=PROFILER_MODES, doc="profiling detail"),
    "max_iter": Param(20, int, minimum=1, doc="iterations of the loop"),
    "seed": Param(0, int, minimum=0, doc="seed of random weights and of added noise"),
    "deterministic": Param(True, bool, doc="deterministic mode (scalebench.determinism)"),
    "num_threads": Param(0, int, minimum=0, doc="torch intra-op threads; 0: keep default"),
}


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


def make_denoiser(params: dict, channels: int, device: torch.device) -> TiledDenoiser:
    """The configured denoiser wrapped in its tiling."""
    model = build_denoiser(params["denoiser"], channels, params["pretrained"], device,
                           params["seed"])
    return TiledDenoiser(model, params["patch_size"], params["overlap"],
                         params["max_batch_size"])
