"""Synthetic problems at any size: generated ellipses super-resolved (2D), or generated
ellipses / ellipsoids denoised (2D images or 3D volumes).

The generators work in row blocks (2D) and z slabs (3D): only the ground truth itself is
full-size. Super-resolution blurs with deepinv's Gaussian filter (std = factor) and keeps
only that small kernel (scalebench.physics.downsampling).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalebench.param_spec import Param
from scalebench.problems.spec import AdjointCase, ProblemSpec

if TYPE_CHECKING:
    from scalebench.problems.base import ProblemSetup

PARAMS = {
    "image_size": Param(256, int, minimum=16, doc="side of the square image (cubic volume)"),
    "channels": Param(1, int, choices=(1, 3), doc="1 (grey) or 3 (colour)"),
    "task": Param("superres", str, choices=("superres", "denoising"), doc="the operator A"),
    "ndim": Param(2, int, choices=(2, 3), doc="2: image; 3: volume (task 'denoising' only)"),
    "factor": Param(2, int, minimum=1, doc="downsampling factor (superres)"),
    "noise_level": Param(0.05, float, minimum=0.0, doc="noise std relative to RMS(A x)"),
    "seed": Param(0, int, minimum=0, doc="seed of the image and of the noise"),
}


def image_shape(image_size: int, channels: int, task: str, factor: int, ndim: int = 2,
                **_) -> tuple[int, ...]:
    if ndim == 3 and task != "denoising":
        raise ValueError(f"ndim 3 (volumes) supports task 'denoising' only, got task '{task}'")
    if task == "superres" and image_size % factor:
        raise ValueError(f"image_size ({image_size}) must be a multiple of factor ({factor})")
    return (channels, *(image_size,) * ndim)


def setup(image_size: int, channels: int, task: str, ndim: int, factor: int,
          noise_level: float, seed: int) -> ProblemSetup:
    from deepinv.physics import Denoising
    from deepinv.physics import functional as dF

    from scalebench.physics.downsampling import BlurDownsampling
    from scalebench.problems.base import ProblemSetup
    from scalebench.problems.phantoms import random_ellipses, random_ellipsoids

    image_shape(image_size, channels, task, factor, ndim)

    def make_operator(_: int) -> Denoising | BlurDownsampling:
        if task == "denoising":
            return Denoising()  # A = identity
        return BlurDownsampling(dF.gaussian_blur(sigma=(factor, factor)), factor)

    generate = random_ellipsoids if ndim == 3 else random_ellipses
    name = f"synthetic_{task}" + ("_3d" if ndim == 3 else "")
    # Super-resolution's norm is cached per configuration; the identity's costs one pass.
    key = {"problem": "synthetic_superres", "image_size": image_size, "channels": channels,
           "factor": factor} if task == "superres" else None
    return ProblemSetup(name, generate(image_size, channels, seed), 1, make_operator,
                        noise_level, seed + 1, operator_key=key)


SPEC = ProblemSpec(
    "synthetic", PARAMS, setup, image_shape, lambda **_: 1,
    "generated image or volume of any size, SR or denoising",
    work_parameters={"image_size": 2},
    adjoint_cases=(AdjointCase(dict(image_size=32, channels=1, task="superres", factor=4)),
                   AdjointCase(dict(image_size=24, channels=3, task="denoising"))))
