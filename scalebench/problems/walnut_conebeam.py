"""3D cone-beam CT of the real Walnut scan (measured projections, per-view geometry vectors).

The views of one source orbit, subsampled to ``num_projections``, are split into
``num_operators`` interleaved groups, one cone-beam operator A_k per group. The measurements
are the pre-processed projections themselves (``data: measured``) or ``A x + noise`` of the
reference volume (``data: simulated``). Ground truth is the reference reconstruction the data
set ships (all three orbits, all 3 x 1200 views; binned like the detector), so the metrics
compare a few-view, single-orbit reconstruction with a high-dose, artefact-free one.

The data come from the scalebench cache (``scalebench fetch --data walnut``); nothing is
downloaded here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalebench.data import walnut
from scalebench.data.cache import cache_root
from scalebench.param_spec import Param
from scalebench.physics.backends import CONEBEAM_PROJECTORS, astra_available, rtk_available
from scalebench.problems.spec import AdjointCase, ProblemSpec

if TYPE_CHECKING:
    import torch

    from scalebench.physics.conebeam import ConeGeometry
    from scalebench.problems.base import ProblemSetup

PARAMS = {
    "orbit": Param(2, int, choices=walnut.ORBITS,
                   doc="source orbit: 1 high, 2 middle (smallest cone angle), 3 low"),
    "binning": Param(4, int, minimum=1, doc="b x b detector pixels and b^3 voxels per sample"),
    "num_projections": Param(60, int, minimum=1, doc="views kept, evenly spread over the orbit"),
    "num_operators": Param(1, int, minimum=1, doc="groups the views are split into"),
    "projector": Param("auto", str, choices=("auto", *CONEBEAM_PROJECTORS),
                       doc="cone-beam projector: torch (CPU/CUDA), rtk (CPU, the rtk extra), "
                       "astra (CUDA); auto = astra when ASTRA has a GPU, else rtk when installed "
                       "and able to take the vectors, else torch"),
    "data": Param("measured", str, choices=("measured", "simulated"),
                  doc="measured projections, or A x + noise of the reference volume"),
    "noise_level": Param(0.01, float, minimum=0.0,
                         doc="noise std relative to RMS(A x), for data: simulated"),
    "seed": Param(0, int, minimum=0, doc="seed of the simulated noise"),
}


def image_shape(orbit: int, binning: int, num_projections: int, num_operators: int,
                **_) -> tuple[int, ...]:
    if num_operators > num_projections:
        raise ValueError(f"num_operators ({num_operators}) must not exceed num_projections "
                         f"({num_projections})")
    cache = cache_root()
    if not walnut.is_unpacked(cache):
        raise ValueError(walnut.not_fetched_message(cache))
    walnut.check_views(walnut.orbit_views(walnut.walnut_folder(cache), orbit), orbit,
                       num_projections)
    shape = walnut.binned_volume_shape(walnut.walnut_folder(cache), binning)
    if min(shape) < 1:
        raise ValueError(f"binning {binning} leaves no voxel of the reference volume")
    return (1, *shape)


def operator_count(num_operators: int, **_) -> int:
    return num_operators


def resolve_projector(name: str, geometry: ConeGeometry) -> str:
    """The projector ``name`` stands for on this machine and geometry."""
    from scalebench.physics.conebeam import RtkConeBeam

    if name == "astra" and not astra_available(cuda=True):
        raise ValueError("projector 'astra' needs astra-toolbox with a CUDA device (use "
                         "'torch', 'rtk' or 'auto')")
    if name == "rtk" and not rtk_available():
        raise ValueError("projector 'rtk' needs ITK-RTK: pip install 'scalebench[rtk]' (or use "
                         "'torch' or 'auto')")
    if name != "auto":
        return name
    if astra_available(cuda=True):
        return "astra"
    if rtk_available():
        try:
            RtkConeBeam(geometry)
        except ValueError:  # vectors RTK cannot take: the torch projector takes any
            return "torch"
        return "rtk"
    return "torch"


def setup(orbit: int, binning: int, num_projections: int, num_operators: int, projector: str,
          data: str, noise_level: float, seed: int) -> ProblemSetup:
    import numpy as np
    import torch

    from scalebench.physics.conebeam import ConeGeometry, make_projector
    from scalebench.problems.base import ProblemSetup

    image_shape(orbit, binning, num_projections, num_operators)
    prepared = walnut.load_prepared(walnut.prepare(cache_root(), orbit, binning,
                                                   num_projections))
    geometry = ConeGeometry.centred(prepared.vectors, prepared.volume.shape,
                                    prepared.voxel_size, prepared.projections.shape[1:],
                                    prepared.shift)
    projector = resolve_projector(projector, geometry)
    groups = [np.arange(k, geometry.num_views, num_operators) for k in range(num_operators)]

    def make_operator(k: int):
        return make_projector(projector, geometry.subset(groups[k]))

    def measure(k: int) -> torch.Tensor:
        return torch.from_numpy(prepared.projections[groups[k]])[None, None]

    x_true = torch.from_numpy(prepared.volume)[None, None]
    measured = data == "measured"
    return ProblemSetup("walnut_conebeam", x_true, num_operators, make_operator,
                        0.0 if measured else noise_level, seed,
                        measure=measure if measured else None)


SPEC = ProblemSpec(
    "walnut_conebeam", PARAMS, setup, image_shape, operator_count,
    "3D cone-beam CT of the measured Walnut scan",
    work_parameters={"num_projections": 1},
    adjoint_cases=tuple(
        AdjointCase(dict(binning=2, num_projections=8, num_operators=2, projector=projector),
                    requires)
        for projector, requires in (("torch", ""), ("rtk", "rtk"), ("astra", "astra-cuda"))))
