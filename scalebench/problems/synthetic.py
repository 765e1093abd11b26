"""Synthetic problems at any size: a generated image of ellipses, super-resolved or denoised."""

from __future__ import annotations

from deepinv.physics import Denoising, Downsampling

from scalebench.params import Param
from scalebench.problems.base import ProblemSetup, ProblemSpec
from scalebench.problems.images import random_ellipses

PARAMS = {
    "image_size": Param(256, int, minimum=16, doc="side of the square image"),
    "channels": Param(1, int, choices=(1, 3), doc="1 (grey) or 3 (colour)"),
    "task": Param("superres", str, choices=("superres", "denoising"), doc="the operator A"),
    "factor": Param(2, int, minimum=1, doc="downsampling factor (superres)"),
    "noise_level": Param(0.05, float, minimum=0.0, doc="noise std relative to RMS(A x)"),
    "seed": Param(0, int, minimum=0, doc="seed of the image and of the noise"),
}


def image_shape(image_size: int, channels: int, task: str, factor: int,
                **_) -> tuple[int, ...]:
    if task == "superres" and image_size % factor:
        raise ValueError(f"image_size ({image_size}) must be a multiple of factor ({factor})")
    return (channels, image_size, image_size)


def setup(image_size: int, channels: int, task: str, factor: int, noise_level: float,
          seed: int) -> ProblemSetup:
    shape = image_shape(image_size, channels, task, factor)

    def make_operator(_: int) -> Denoising | Downsampling:
        if task == "denoising":
            return Denoising()  # A = identity
        return Downsampling(img_size=shape, factor=factor, filter="gaussian",
                            padding="circular")

    return ProblemSetup(f"synthetic_{task}", random_ellipses(image_size, channels, seed), 1,
                        make_operator, noise_level, seed + 1)


SPEC = ProblemSpec("synthetic", PARAMS, setup, image_shape, lambda **_: 1,
                   "generated image of any size, SR or denoising")
