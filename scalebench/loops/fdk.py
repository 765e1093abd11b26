"""Feldkamp-Davis-Kress (FDK) reconstruction of circular-orbit cone-beam CT
(walnut_conebeam): each view is weighted by the cosine of its rays' angle to the detector's
normal, filtered along the detector rows by fbp's ramp-family filters (one implementation,
``scalebench.loops.fbp``), weighted again by that cosine and a per-view scale, then
back-projected by the problem's own operator's adjoint A^T (torch, RTK or ASTRA projector
alike, on CPU or CUDA).

Derivation of the weights and the scale. FDK (Kak & Slaney, ch. 3.6; Feldkamp et al. 1984)
reads, for N views evenly spread over a full orbit of radius R (source to rotation axis),

    f(x) = 1/2 * (2 pi / N) * sum_views R^2 / U(x)^2 * Q(a(x), b(x)),
    Q = (cos * p) *_a h,  cos = D / |p_pixel - s|,

where U(x) is the depth of x along the central ray (the normal from the source s to the
detector plane, at distance D), p the view's line integrals on a virtual detector through the
axis (magnification D / R, so its pixel pitch is du R / D) and h the ramp, whose discrete
form on that pitch is (D / (du R)) times the unit-pitch ramp h_1 of fbp. The adjoint of a
ray-driven line-integral projector (trilinear or Joseph samples weighted by their length)
back-projects a detector function q as

    A^T q (x) = sum_views h^3 q / (|x - s|^2 dOmega),  dOmega = |du x dv| D / |p_pixel - s|^3,

(the rays' density where they cross x; h the voxel side). Since |x - s| / |p_pixel - s|
= U / D, A^T (cos * q) = sum_views h^3 D^2 q / (U^2 |du x dv|): the adjoint of the twice
cosine-weighted data carries FDK's 1 / U^2. Hence

    f = pi / N * A^T(cos * (h_1 * (cos * p)) * R |du x dv| / (|du| h^3 D)),

the filter fbp builds being 2 h_1 (so the constant is pi / (2 N) with it). R is each source's
distance to the world z axis, about which the Walnut's orbits (and ``circular_vectors``) turn.
Every quantity is per view, from its own geometry vectors, so the filtering needs no
communication: with distributed physics each rank weights and filters its own views and the
adjoint's all-reduce sums the back-projections.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from scalebench.loops.fbp import filter_projections, frequency_filter, padded_length
from scalebench.loops.inference_parameters import FBP_FILTERS
from scalebench.problems.base import Problem
from scalebench.rank.profiling import StepProfiler

FILTERS = FBP_FILTERS


def view_weights(vectors: np.ndarray, detector_shape: tuple[int, int], voxel_size: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The cosine weight of every pixel (views, rows, cols) and each view's scale (views,):
    R |du x dv| / (|du| h^3 D), from ASTRA ``cone_vec`` rows (module docstring)."""
    rows, cols = detector_shape
    source, centre, du, dv = (vectors[:, i:i + 3] for i in (0, 3, 6, 9))
    normal = np.cross(du, dv)
    area = np.linalg.norm(normal, axis=1)
    normal = normal / area[:, None]
    distance = np.abs(np.einsum("vi,vi->v", centre - source, normal))  # D, per view
    row = np.arange(rows) - (rows - 1) / 2
    col = np.arange(cols) - (cols - 1) / 2
    pixels = centre[:, None, None, :] + col[None, None, :, None] * du[:, None, None, :] \
        + row[None, :, None, None] * dv[:, None, None, :]
    cosine = distance[:, None, None] / np.linalg.norm(pixels - source[:, None, None, :],
                                                      axis=-1)
    radius = np.hypot(source[:, 0], source[:, 1])  # R: to the rotation (z) axis
    scale = radius * area / (np.linalg.norm(du, axis=1) * voxel_size ** 3 * distance)
    return cosine, scale


def local_operators(problem: Problem) -> list:
    """This process's operators (a stack's, or a rank's share under distributed physics)."""
    physics = problem.physics
    operators = getattr(physics, "physics_list", None)
    return list(operators if operators is not None else physics.operators)


def fdk_reconstruction(problem: Problem, filter_name: str, num_views: int) -> torch.Tensor:
    """FDK of the problem's projections over every one of its ``num_views`` views (each
    rank's operators hold a share of them; the adjoint sums the shares)."""
    weighted = []
    for operator, y_k in zip(local_operators(problem), problem.y, strict=True):
        geometry = operator.geometry
        cosine, scale = view_weights(geometry.vectors, geometry.detector_shape,
                                     geometry.voxel_size)
        cosine = torch.from_numpy(cosine).to(y_k.device)
        scale = torch.from_numpy(scale).to(y_k.device)[:, None, None]
        response = frequency_filter(filter_name, padded_length(y_k.shape[-1]))
        filtered = filter_projections(y_k.double() * cosine, response, dim=-1)
        weighted.append((filtered.double() * cosine * scale).to(y_k.dtype))
    back = problem.physics.A_adjoint(type(problem.y)(weighted))
    return back * (math.pi / (2 * num_views))


class FDKLoop:
    """Starts from the zero volume; its one iteration is the FDK, in the "backproject" step."""

    def __init__(self, problem: Problem, filter_name: str, profiler: StepProfiler) -> None:
        self.problem, self.filter_name, self.profiler = problem, filter_name, profiler
        self.num_views = int(problem.source["params"]["num_projections"])
        self.x = torch.zeros_like(problem.x_true)

    @torch.no_grad()
    def iterate(self) -> None:
        with self.profiler.step("backproject"):
            self.x = fdk_reconstruction(self.problem, self.filter_name, self.num_views)
