"""The training benchmark's own problem, 3D denoising volumes (its others are inference
problems of ``scalebench.problems``; the list is the benchmark's record,
``scalebench.benchmarks.TRAINING``).

The volumes are built here from the 2D ellipse generator (each slice blends two generated
images along the depth axis), so that 3D training runs without a 3D problem in
``scalebench.problems``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalebench.param_spec import Param
from scalebench.problems.spec import AdjointCase, ProblemSpec

if TYPE_CHECKING:
    import torch

    from scalebench.problems.base import ProblemSetup

VOLUME_PARAMS = {
    "image_size": Param(64, int, minimum=16, doc="side of the cubic volume, in voxels"),
    "channels": Param(1, int, choices=(1, 3), doc="1 (grey) or 3 (colour)"),
    "noise_level": Param(0.1, float, minimum=0.0, doc="noise std relative to RMS(x)"),
    "seed": Param(0, int, minimum=0, doc="seed of the volume and of the noise"),
}
OTHER_IMAGE_SEED = 7919  # second image of a volume's blend: another seed of the generator


def ellipse_volume(size: int, channels: int, seed: int) -> torch.Tensor:
    """(1, C, size, size, size) volume: slice d blends two ellipse images with weight d/size."""
    import torch

    from scalebench.problems.phantoms import random_ellipses

    first = random_ellipses(size, channels, seed)
    second = random_ellipses(size, channels, seed + OTHER_IMAGE_SEED)
    weight = ((torch.arange(size, dtype=torch.float32) + 0.5) / size).view(1, 1, size, 1, 1)
    return (weight * first[:, :, None] + (1.0 - weight) * second[:, :, None]).contiguous()


def volume_shape(image_size: int, channels: int, **_) -> tuple[int, ...]:
    return (channels, image_size, image_size, image_size)


def volume_setup(image_size: int, channels: int, noise_level: float,
                 seed: int) -> ProblemSetup:
    from deepinv.physics import Denoising

    from scalebench.problems.base import ProblemSetup

    return ProblemSetup("volume_denoising", ellipse_volume(image_size, channels, seed), 1,
                        lambda _: Denoising(), noise_level, seed + 1)


VOLUME_SPEC = ProblemSpec("volume_denoising", VOLUME_PARAMS, volume_setup, volume_shape,
                          lambda **_: 1, "generated 3D volume of any size, denoising",
                          # the report's weak scaling counts a side's growth as 2D pixels'
                          work_parameters={"image_size": 2},
                          adjoint_cases=(AdjointCase(dict(image_size=16)),))
