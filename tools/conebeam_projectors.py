"""Cone-beam projectors on per-view geometry vectors: time, peak memory, adjointness, agreement.

Candidates: scalebench's torch projector (TorchConeBeam), ITK-RTK's Joseph projector pair
(CPU) and mbirjax's ConeBeamModel (JAX), each where installed; ASTRA's where it has a GPU.
The geometry is a circular orbit at the Walnut scanner's proportions with small per-view
perturbations (detector shifts and tilts, source offsets) like a corrected scan's vectors.
RTK takes each view's vectors (AddProjection with source, detector and its axes); mbirjax
describes a circular or helical orbit by angles and two distances only, so it is measured on
the unperturbed orbit and cannot reproduce per-view vectors.

    python -m tools.conebeam_projectors [--sizes 64,128] [--views 60]
    # with RTK/mbirjax from another environment appended to the path:
    PYTHONPATH=.../site-packages python -m tools.conebeam_projectors

Prints one row per (projector, size): forward and adjoint seconds (median of 3), peak host
memory of the process during the pair, <Ax, y> versus <x, A^T y> relative error, and the
relative difference of A x to the torch projector's (random x, so interpolation differences
weigh heavily; smooth objects agree more closely). Peak memory includes the libraries loaded.
"""

from __future__ import annotations

import numpy as np
import torch

from scalebench.physics.backends import astra_available
from scalebench.physics.conebeam import (
    AstraConeBeam,
    ConeGeometry,
    RtkConeBeam,
    TorchConeBeam,
    circular_vectors,
)
from scalebench.rank.profiling import HostPeakMemory
from tools.measuring import Table, add_sizes, timed, tool_parser

# Walnut scanner proportions (mm): source 66 mm from the axis, detector 133 mm beyond it.
SOURCE_MM, DETECTOR_MM = 66.0, 133.0


def rotation_matrix(axis_angle: np.ndarray) -> np.ndarray:
    """Rodrigues' formula."""
    angle = np.linalg.norm(axis_angle)
    k = axis_angle / angle
    cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * cross + (1 - np.cos(angle)) * cross @ cross


def geometry(size: int, views: int, perturbed: bool = True) -> ConeGeometry:
    """A volume of size^3 voxels seen whole by a (size x 1.25 size) detector."""
    voxel = 50.0 / size  # a 50 mm field of view, like the walnut's 501 voxels of 0.1 mm
    magnification = (SOURCE_MM + DETECTOR_MM) / SOURCE_MM
    rows, cols = size, int(size * 1.25)
    pixel = 1.2 * voxel * magnification * size / cols
    vectors = circular_vectors(views, SOURCE_MM, DETECTOR_MM, pixel)
    if perturbed:
        rng = np.random.default_rng(0)
        vectors[:, 0:3] += rng.normal(0, 0.2, (views, 3))  # source wobble
        vectors[:, 3:6] += rng.normal(0, 0.5, (views, 3))  # detector shifts
        for view in range(views):  # small detector rotations (exact, axes stay orthogonal)
            rotation = rotation_matrix(rng.normal(0, 0.01, 3))
            vectors[view, 6:9] = rotation @ vectors[view, 6:9]
            vectors[view, 9:12] = rotation @ vectors[view, 9:12]
    return ConeGeometry.centred(vectors, (size, size, size), voxel, (rows, cols))


REPEATS = 3


def report(table: Table, name: str, size: int, forward, adjoint, x: np.ndarray,
           y: np.ndarray, reference: np.ndarray | None) -> np.ndarray:
    memory = HostPeakMemory()  # peaks from here on
    forward_timed = timed(lambda: forward(x), REPEATS)
    adjoint_timed = timed(lambda: adjoint(y), REPEATS)
    ax, aty = forward_timed.result, adjoint_timed.result
    peak = memory.read_mib()
    lhs = float(np.sum(ax.astype(np.float64) * y))
    rhs = float(np.sum(x.astype(np.float64) * aty))
    agreement = "" if reference is None else \
        f"{np.linalg.norm(ax - reference) / np.linalg.norm(reference):.2e}"
    table.row(name, f"{size}^3", f"{forward_timed.median:.3f}", f"{adjoint_timed.median:.3f}",
              f"{peak:.0f}", f"{abs(lhs - rhs) / abs(lhs):.1e}", agreement)
    return ax


def numpy_pair(operator):
    """Forward and adjoint of a scalebench projector on numpy arrays."""

    def forward(x):
        return operator.A(torch.from_numpy(x)[None, None])[0, 0].numpy()

    def adjoint(y):
        return operator.A_adjoint(torch.from_numpy(y)[None, None])[0, 0].numpy()

    return forward, adjoint


def mbirjax_pair(g: ConeGeometry):
    """mbirjax's cone-beam model on the circular orbit (its own units: detector pixels)."""
    import mbirjax

    rows, cols = g.detector_shape
    pixel = np.linalg.norm(g.vectors[0, 6:9])
    angles = np.arctan2(g.vectors[:, 0], -g.vectors[:, 1])
    model = mbirjax.ConeBeamModel((g.num_views, rows, cols), angles,
                                  source_detector_dist=(SOURCE_MM + DETECTOR_MM) / pixel,
                                  source_iso_dist=SOURCE_MM / pixel)
    model.set_params(recon_shape=g.volume_shape[::-1], delta_voxel=g.voxel_size / pixel)

    def forward(x):
        # mbirjax volumes are (rows, cols, slices): ours (z, y, x) transposed.
        return np.asarray(model.forward_project(np.transpose(x, (1, 2, 0))))

    def adjoint(y):
        return np.transpose(np.asarray(model.back_project(y)), (2, 0, 1))

    return forward, adjoint


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    add_sizes(parser, [64, 128], "volume sides")
    parser.add_argument("--views", type=int, default=60)
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    table = Table("projector", "size", "A s", "A^T s", "peak MiB", "adjointness", "vs torch")
    table.header()
    for size in args.sizes:
        g = geometry(size, args.views)
        rng = np.random.default_rng(1)
        x = rng.random(g.volume_shape, dtype=np.float32)
        y = rng.random((g.num_views, *g.detector_shape), dtype=np.float32)
        reference = report(table, "torch", size, *numpy_pair(TorchConeBeam(g)), x, y, None)
        candidates = {"rtk": lambda g=g: numpy_pair(RtkConeBeam(g))}
        if astra_available(cuda=True):
            candidates["astra"] = lambda g=g: numpy_pair(AstraConeBeam(g))
        for name, make in candidates.items():
            try:
                functions = make()
            except ImportError as error:
                table.row(name, f"{size}^3", f"not installed ({error})")
                continue
            report(table, name, size, *functions, x, y, reference)
        try:
            # Its angle origin and detector orientation are not mapped onto cone_vec here:
            # time, memory and adjointness only.
            circular = geometry(size, args.views, perturbed=False)
            report(table, "mbirjax", size, *mbirjax_pair(circular), x, y, None)
        except ImportError as error:
            table.row("mbirjax", f"{size}^3", f"not installed ({error})")


if __name__ == "__main__":
    main()
