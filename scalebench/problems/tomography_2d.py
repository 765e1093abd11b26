"""2D parallel-beam computed tomography of the Shepp-Logan phantom.

The angles over [0, 180) degrees are split into ``num_operators`` interleaved groups, one
operator per group, so that the projection work can later be spread over ranks.
"""

from __future__ import annotations

import torch
from deepinv.physics import Tomography

from scalebench.params import Param
from scalebench.problems.base import ProblemSetup, ProblemSpec
from scalebench.problems.images import shepp_logan

PARAMS = {
    "image_size": Param(128, int, minimum=16, doc="side of the square image, in pixels"),
    "num_angles": Param(90, int, minimum=1, doc="projection angles over [0, 180) degrees"),
    "num_operators": Param(1, int, minimum=1, doc="groups the angles are split into"),
    "noise_level": Param(0.01, float, minimum=0.0, doc="noise std relative to RMS(A x)"),
    "seed": Param(0, int, minimum=0, doc="seed of the measurement noise"),
}


def angle_groups(num_angles: int, num_operators: int) -> list[torch.Tensor]:
    """Interleaved groups of projection angles in degrees: group k holds angles k, k+K, ..."""
    angles = torch.arange(num_angles, dtype=torch.float32) * (180.0 / num_angles)
    return [angles[k::num_operators] for k in range(num_operators)]


def image_shape(image_size: int, num_angles: int, num_operators: int, **_) -> tuple[int, ...]:
    if num_operators > num_angles:
        raise ValueError(
            f"num_operators ({num_operators}) must not exceed num_angles ({num_angles})"
        )
    return (1, image_size, image_size)


def operator_count(num_operators: int, **_) -> int:
    return num_operators


def setup(image_size: int, num_angles: int, num_operators: int, noise_level: float,
          seed: int) -> ProblemSetup:
    image_shape(image_size, num_angles, num_operators)
    groups = angle_groups(num_angles, num_operators)

    def make_operator(k: int) -> Tomography:
        return Tomography(angles=groups[k], img_width=image_size, circle=False,
                          normalize=False)

    return ProblemSetup("tomography_2d", shepp_logan(image_size), num_operators, make_operator,
                        noise_level, seed)


SPEC = ProblemSpec("tomography_2d", PARAMS, setup, image_shape, operator_count,
                   "2D parallel-beam CT of a phantom")
