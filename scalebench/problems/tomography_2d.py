"""2D parallel-beam computed tomography of a phantom: the Shepp-Logan phantom (the default)
or a seeded random one (``image``: IMAGES, scalebench.problems.images).

The angles over [0, 180) degrees are split into ``num_operators`` interleaved groups, one
operator per group, so that the projection work can later be spread over ranks. The projector
(scalebench.physics.parallel_beam) is chosen by ``projector``: 'astra' (ASTRA's CPU 'linear'
projector, its CUDA projector on a GPU), 'torch' (chunked Joseph projector, any device,
deterministic, exact transpose), 'deepinv' (deepinv's Tomography, which stores sampling grids
of angles x 2 N^2 floats: small sizes only) or 'auto' (astra where it is installed, with CUDA
on a CUDA machine, else torch). Every choice has the same geometry and sinogram layout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalebench.param_spec import Param
from scalebench.physics.backends import astra_available
from scalebench.problems.images import ImageFamily
from scalebench.problems.spec import AdjointCase, ProblemSpec
from scalebench.rank.devices import device_type

if TYPE_CHECKING:
    import torch
    from deepinv.physics import LinearPhysics

    from scalebench.problems.base import ProblemSetup


def draw_phantom(name: str, size: int) -> torch.Tensor:
    """The phantom called ``name`` (shepp_logan or phantom-<n>), (1, 1, size, size)."""
    from scalebench.problems.phantoms import random_phantom, shepp_logan

    seed = IMAGES.seed(name)
    return shepp_logan(size) if seed is None else random_phantom(size, seed)


IMAGES = ImageFamily(
    parameter="image", default="shepp_logan", named=("shepp_logan",), seeded="phantom",
    validation=("phantom-101", "phantom-102"),
    test=("shepp_logan", "phantom-1", "phantom-2", "phantom-3"), channels=1,
    draw=draw_phantom,
    description="the Shepp-Logan phantom; `phantom-<n>`: a body outline (a dense rim around "
                "soft tissue) holding 6 to 12 inner ellipses of random densities, from seed n")

PROJECTOR_CHOICES = ("auto", "astra", "torch", "deepinv")
PARAMS = {
    "image_size": Param(128, int, minimum=16, doc="side of the square image, in pixels"),
    "num_angles": Param(90, int, minimum=1, doc="projection angles over [0, 180) degrees"),
    "num_operators": Param(1, int, minimum=1, doc="groups the angles are split into"),
    "projector": Param("auto", str, choices=PROJECTOR_CHOICES,
                       doc="auto: astra when installed (with CUDA on a CUDA machine), "
                           "else torch"),
    "noise_level": Param(0.01, float, minimum=0.0, doc="noise std relative to RMS(A x)"),
    "seed": Param(0, int, minimum=0, doc="seed of the measurement noise"),
    "image": Param(IMAGES.default, str, omitted_at_default=True,
                   doc="the phantom: `shepp_logan`, or `phantom-<n>` "
                       "drawn from seed n (docs: image families)"),
}


def angle_groups(num_angles: int, num_operators: int) -> list[torch.Tensor]:
    """Interleaved groups of projection angles in degrees: group k holds angles k, k+K, ..."""
    import torch

    angles = torch.arange(num_angles, dtype=torch.float32) * (180.0 / num_angles)
    return [angles[k::num_operators] for k in range(num_operators)]


def resolve_projector(projector: str) -> str:
    """The projector 'auto' stands for here: ASTRA where it is installed and, on a machine
    with CUDA (where 'auto' devices run), built with CUDA; else torch, which runs on any
    device. 'astra' when ASTRA is not installed is an error."""
    if projector == "auto":  # the cheap checks first: device_type imports torch
        astra_runs_here = astra_available() and (
            astra_available(cuda=True) or device_type("auto") == "cpu")
        return "astra" if astra_runs_here else "torch"
    if projector == "astra" and not astra_available():
        raise ValueError("projector 'astra' needs astra-toolbox (pip install "
                         "'scalebench[image]'); use projector 'torch' or 'auto'")
    return projector


# ||A||^2 starts from the leading vector of an operator over every 8th to 16th angle of each
# group (of at least 8 angles): a tenth of the cost per iteration, and Lanczos on the whole
# A^T A then stops after 2 applications instead of 5 (scalebench.rank.operator_norm). Groups of
# fewer than 64 angles gain nothing from it and keep the random start.
NORM_START_STRIDES = (8, 16)
NORM_START_MIN_ANGLES = 8


def norm_start_stride(num_angles: int, num_operators: int) -> int:
    """Every how many angles of a group the norm's start operator keeps (1: no start
    operator)."""
    low, high = NORM_START_STRIDES
    stride = min(high, num_angles // num_operators // NORM_START_MIN_ANGLES)
    return stride if stride >= low else 1


def image_shape(image_size: int, num_angles: int, num_operators: int,
                image: str = IMAGES.default, **_) -> tuple[int, ...]:
    IMAGES.check(image)
    if num_operators > num_angles:
        raise ValueError(
            f"num_operators ({num_operators}) must not exceed num_angles ({num_angles})"
        )
    return (1, image_size, image_size)


def operator_count(num_operators: int, **_) -> int:
    return num_operators


def workspace_elements(image_size: int, num_angles: int, num_operators: int, projector: str,
                       chunk_elements: int | None = None, **_) -> int:
    """The torch projector's largest chunk over one operator's angles (the largest group);
    the other projectors' temporaries are not chunked here (0)."""
    if resolve_projector(projector) != "torch":
        return 0
    angles = -(-num_angles // num_operators)
    from scalebench.physics import parallel_beam

    return parallel_beam.workspace_elements(image_size, angles, chunk_elements=chunk_elements)


def make_projector(angles: torch.Tensor, image_size: int, projector: str) -> LinearPhysics:
    """One parallel-beam operator over ``angles`` (degrees) with a resolved projector name."""
    from deepinv.physics import Tomography

    from scalebench.physics.parallel_beam import ParallelBeam2D

    if projector == "deepinv":
        return Tomography(angles=angles, img_width=image_size, circle=False, normalize=False)
    return ParallelBeam2D(angles, image_size, projector)


def setup(image_size: int, num_angles: int, num_operators: int, projector: str,
          noise_level: float, seed: int, image: str = IMAGES.default) -> ProblemSetup:
    from scalebench.problems.base import ProblemSetup

    image_shape(image_size, num_angles, num_operators, image)
    projector = resolve_projector(projector)
    groups = angle_groups(num_angles, num_operators)

    def make_operator(k: int) -> LinearPhysics:
        return make_projector(groups[k], image_size, projector)

    stride = norm_start_stride(num_angles, num_operators)

    def make_norm_start(k: int) -> LinearPhysics:
        return make_projector(groups[k][::stride], image_size, projector)

    key = {"problem": "tomography_2d", "image_size": image_size, "num_angles": num_angles,
           "num_operators": num_operators, "projector": projector}
    return ProblemSetup("tomography_2d", IMAGES.image(image, image_size), num_operators,
                        make_operator,
                        noise_level, seed, operator_key=key,
                        make_norm_start=make_norm_start if stride > 1 else None)


SPEC = ProblemSpec(
    "tomography_2d", PARAMS, setup, image_shape, operator_count,
    "2D parallel-beam CT of a phantom", workspace_elements,
    work_parameters={"num_angles": 1, "image_size": 2}, images=IMAGES,
    adjoint_cases=(
        AdjointCase(dict(image_size=32, num_angles=10, num_operators=1, projector="torch")),
        AdjointCase(dict(image_size=33, num_angles=12, num_operators=3, projector="torch")),
        AdjointCase(dict(image_size=33, num_angles=12, num_operators=3, projector="astra"),
                    "astra"),
        AdjointCase(dict(image_size=48, num_angles=30, num_operators=1, projector="astra"),
                    "astra"),
        AdjointCase(dict(image_size=32, num_angles=10, num_operators=2, projector="deepinv")),
    ))
