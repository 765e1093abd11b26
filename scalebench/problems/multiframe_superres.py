"""Multi-frame super-resolution of a colour image: a photograph scikit-image ships (the
astronaut by default) or a seeded synthetic image (``image``: IMAGES,
scalebench.problems.images).

Each of the ``num_frames`` low-resolution frames sees the image through its own anisotropic
Gaussian blur, rotated by 180/num_frames degrees from one frame to the next, then is
downsampled by ``factor`` and corrupted by Gaussian noise. Any size works, 16 megapixels
(image_size 4096) and beyond: the photograph's central square is resampled straight to the
requested size,
and each frame's operator stores only its small blur kernel
(scalebench.physics.downsampling).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scalebench.param_spec import Param
from scalebench.problems.images import PHOTOGRAPHS, ImageFamily
from scalebench.problems.spec import AdjointCase, ProblemSpec

if TYPE_CHECKING:
    import torch

    from scalebench.problems.base import ProblemSetup


def draw_image(name: str, size: int) -> torch.Tensor:
    """The colour image called ``name`` (a photograph or synthetic-<n>), (1, 3, size, size)."""
    from scalebench.problems.phantoms import photograph, random_ellipses

    seed = IMAGES.seed(name)
    return photograph(name, size) if seed is None else random_ellipses(size, 3, seed)


IMAGES = ImageFamily(
    parameter="image", default="astronaut", named=PHOTOGRAPHS, seeded="synthetic",
    validation=("chelsea", "synthetic-101"),
    test=("astronaut", "coffee", "rocket", "synthetic-1"), channels=3, draw=draw_image,
    description="colour photographs shipped with scikit-image (their central square, "
                "resized); `synthetic-<n>`: 24 random overlapping colour ellipses from seed n")

PARAMS = {
    "image_size": Param(256, int, minimum=16, doc="side of the high-resolution image "
                                                  "(4096: 16.7 megapixels)"),
    "num_frames": Param(4, int, minimum=1, doc="number of low-resolution frames"),
    "blur_sigma": Param(1.5, float, minimum=0.1, doc="std of the blur along its long axis"),
    "factor": Param(2, int, minimum=1, doc="downsampling factor of every frame"),
    "noise_level": Param(0.01, float, minimum=0.0, doc="noise std relative to RMS(A x)"),
    "seed": Param(0, int, minimum=0, doc="seed of the measurement noise"),
    "image": Param(IMAGES.default, str, omitted_at_default=True,
                   doc="the ground truth: a photograph (`astronaut`, "
                       "`coffee`, ...) or `synthetic-<n>` drawn from "
                       "seed n (docs: image families)"),
}


def rotated_gaussian_kernel(sigma: float, angle: float) -> torch.Tensor:
    """Normalised (1, 1, k, k) Gaussian with stds (sigma, sigma / 2) rotated by ``angle``."""
    import torch

    radius = max(1, math.ceil(3 * sigma))
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float32)
    yy, xx = torch.meshgrid(offsets, offsets, indexing="ij")
    u = xx * math.cos(angle) + yy * math.sin(angle)
    v = -xx * math.sin(angle) + yy * math.cos(angle)
    kernel = torch.exp(-0.5 * ((u / sigma) ** 2 + (v / (sigma / 2)) ** 2))
    return (kernel / kernel.sum())[None, None]


def image_shape(image_size: int, factor: int, image: str = IMAGES.default,
                **_) -> tuple[int, ...]:
    IMAGES.check(image)
    if image_size % factor:
        raise ValueError(f"image_size ({image_size}) must be a multiple of factor ({factor})")
    return (3, image_size, image_size)


def operator_count(num_frames: int, **_) -> int:
    return num_frames


def setup(image_size: int, num_frames: int, blur_sigma: float, factor: int,
          noise_level: float, seed: int, image: str = IMAGES.default) -> ProblemSetup:
    from scalebench.physics.downsampling import BlurDownsampling
    from scalebench.problems.base import ProblemSetup

    image_shape(image_size, factor, image)

    def make_operator(k: int) -> BlurDownsampling:
        return BlurDownsampling(rotated_gaussian_kernel(blur_sigma, math.pi * k / num_frames),
                                factor)

    key = {"problem": "multiframe_superres", "image_size": image_size,
           "num_frames": num_frames, "blur_sigma": blur_sigma, "factor": factor}
    return ProblemSetup("multiframe_superres", IMAGES.image(image, image_size), num_frames,
                        make_operator, noise_level, seed, operator_key=key)


SPEC = ProblemSpec("multiframe_superres", PARAMS, setup, image_shape, operator_count,
                   "multi-frame super-resolution of a colour image",
                   work_parameters={"num_frames": 1, "image_size": 2}, images=IMAGES,
                   adjoint_cases=(AdjointCase(dict(image_size=32, num_frames=3, factor=2)),
                                  AdjointCase(dict(image_size=36, num_frames=2, factor=3))))
