"""One job: the 3D cone-beam operator, three projectors (torch, ITK-RTK, ASTRA) of one geometry.

The geometry is per-view scanner vectors (ASTRA's ``cone_vec`` layout); the projectors share
it, its conventions and ``make_projector``, so they stay together in one module.

Each view is 12 numbers: source position, detector centre, the vector from one detector pixel
to the next along a row (u, along the columns) and the vector from one row to the next (v),
all in world units (mm). The volume is a voxel grid, array axes (z, y, x), whose voxel
(0, 0, 0) is centred at ``origin`` (x, y, z) with cubic voxels of side ``voxel_size``.
Measurements of a set of views are shaped (views, rows, cols).

``TorchConeBeam`` is the pure-torch projector (CPU and CUDA): each detector pixel's ray is
sampled at points spaced ``step`` voxels apart between its entry into and exit from the
volume's box, and the volume is read there by trilinear interpolation (``grid_sample``;
voxels outside the grid are zero), so ``A x`` approximates the line integral of x in world
units. Its adjoint is the exact transpose: on CPU the gradient of that same sampling (torch's
CPU kernel accumulates in a fixed order, so it is deterministic); on CUDA, whose
grid-sampling gradient uses atomic adds, the same trilinear weights scattered with
``index_add_``, which is deterministic under torch's deterministic mode (scalebench's
``deterministic: true``). Rays are processed in chunks of at most ``max_samples`` sample
points, so memory stays O(volume + measurements + chunk).

``RtkConeBeam`` is ITK-RTK's Joseph projector pair (CPU; the optional ``rtk`` extra): on the
same per-view vectors it is tens of times faster than the torch projector on CPU, with an
exact adjoint and deterministic results (tools/conebeam_projectors.py measures them side by
side). ``AstraConeBeam`` is ASTRA's GPU projector on the same geometry (``cone_vec``);
ASTRA's 3D projectors need CUDA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from deepinv.physics import LinearPhysics

from scalebench.physics.backends import CONEBEAM_PROJECTORS
from scalebench.physics.host import per_item_on_host

# Sample points per chunk: with 8 corners each, 128 MiB of int64 indices and 64 MiB of
# float32 weights (and, scattering on CUDA, 64 MiB of values).
DEFAULT_MAX_SAMPLES = 1 << 21


@dataclass(frozen=True)
class ConeGeometry:
    """Volume grid and per-view cone-beam geometry (world units: mm)."""

    vectors: np.ndarray  # (views, 12) ASTRA cone_vec rows
    volume_shape: tuple[int, int, int]  # (nz, ny, nx)
    voxel_size: float
    origin: tuple[float, float, float]  # (x, y, z) centre of voxel (0, 0, 0)
    detector_shape: tuple[int, int]  # (rows, cols)

    @classmethod
    def centred(cls, vectors: np.ndarray, volume_shape: tuple[int, int, int],
                voxel_size: float, detector_shape: tuple[int, int],
                shift: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> ConeGeometry:
        """A grid centred on the world origin (plus ``shift``), as ASTRA's default volume."""
        nz, ny, nx = volume_shape
        origin = tuple(s - (n - 1) / 2 * voxel_size
                       for s, n in zip(shift, (nx, ny, nz), strict=True))
        return cls(np.asarray(vectors, dtype=np.float64), tuple(volume_shape),
                   float(voxel_size), origin, tuple(detector_shape))

    @property
    def num_views(self) -> int:
        return len(self.vectors)

    def subset(self, views: np.ndarray | list[int]) -> ConeGeometry:
        return ConeGeometry(self.vectors[np.asarray(views)], self.volume_shape,
                            self.voxel_size, self.origin, self.detector_shape)


class TorchConeBeam(LinearPhysics):
    """Cone-beam projection with an exact adjoint, pure torch (CPU or CUDA)."""

    def __init__(self, geometry: ConeGeometry, step: float = 0.5,
                 max_samples: int = DEFAULT_MAX_SAMPLES, **kwargs) -> None:
        super().__init__(**kwargs)
        self.geometry = geometry
        self.step = step
        self.max_samples = max_samples
        self.register_buffer("vectors", torch.as_tensor(geometry.vectors, dtype=torch.float64),
                             persistent=False)

    # -- ray sampling ------------------------------------------------------------------
    def _rays(self, first: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Sources and unit directions of rays first..first+count-1 (view-major order)."""
        rows, cols = self.geometry.detector_shape
        per_view = rows * cols
        index = torch.arange(first, first + count, device=self.vectors.device)
        view, pixel = index // per_view, index % per_view
        row = (pixel // cols).double() - (rows - 1) / 2
        col = (pixel % cols).double() - (cols - 1) / 2
        vec = self.vectors[view]
        source = vec[:, 0:3]
        target = vec[:, 3:6] + col[:, None] * vec[:, 6:9] + row[:, None] * vec[:, 9:12]
        direction = target - source
        return source, direction / direction.norm(dim=1, keepdim=True)

    def _num_samples(self) -> int:
        """Samples per ray: enough to cross the volume's box diagonal."""
        g = self.geometry
        diagonal = math.sqrt(sum((n * g.voxel_size) ** 2 for n in g.volume_shape))
        return math.ceil(diagonal / (self.step * g.voxel_size)) + 1

    def _scale(self, device: torch.device) -> torch.Tensor:
        """Per axis (x, y, z): voxel index = (normalised coordinate + 1) / 2 * scale."""
        nz, ny, nx = self.geometry.volume_shape
        return torch.tensor([max(n - 1, 1) for n in (nx, ny, nz)], dtype=torch.float32,
                            device=device)

    def _sample_points(self, first: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample points of rays first..first+count-1 in grid_sample's normalised coordinates
        (rays, samples, 3; align_corners=True: -1 and 1 are the first and last voxel centres),
        and their weights (rays, samples): the step length inside the volume's box, zero
        beyond it."""
        g = self.geometry
        nz, ny, nx = g.volume_shape
        device = self.vectors.device
        source, direction = self._rays(first, count)
        origin = torch.tensor(g.origin, dtype=torch.float64, device=device)
        sizes = torch.tensor((nx, ny, nz), dtype=torch.float64, device=device)
        low = origin - g.voxel_size / 2
        high = origin + (sizes - 0.5) * g.voxel_size
        # Slab method: where each ray enters and leaves the volume's box.
        safe = torch.where(direction.abs() < 1e-12, torch.full_like(direction, 1e-12),
                           direction)
        t0, t1 = (low - source) / safe, (high - source) / safe
        t_enter = torch.minimum(t0, t1).amax(dim=1)
        t_exit = torch.maximum(t0, t1).amin(dim=1)
        dt = self.step * g.voxel_size
        # As many samples as the longest chord of this chunk needs (at most the diagonal's).
        longest = float((t_exit - t_enter).clamp(min=0).max()) if count else 0.0
        k = torch.arange(min(math.ceil(longest / dt) + 1, self._num_samples()),
                         dtype=torch.float32, device=device)
        # Entry point and step in normalised coordinates (float64), then one fused float32
        # multiply-add per sample.
        half_scale = self._scale(device).double() * g.voxel_size / 2
        start = (source + t_enter[:, None] * direction - origin) / half_scale - 1
        step = direction * dt / half_scale
        offsets = (k + 0.5)[None, :]
        grid = torch.addcmul(start.float()[:, None, :], offsets[..., None],
                             step.float()[:, None, :])
        weights = (offsets < ((t_exit - t_enter) / dt).float()[:, None]).float() * dt
        return grid, weights

    def _grid(self, first: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """grid_sample's grid (1, rays, samples, 1, 3) and the sample weights."""
        grid, weights = self._sample_points(first, count)
        return grid[None, :, :, None, :], weights

    def _samples(self, first: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Flat voxel indices and weights (rays, samples * 8) of rays first..first+count-1."""
        g = self.geometry
        nz, ny, nx = g.volume_shape
        grid, inside = self._sample_points(first, count)
        f = (grid + 1) * 0.5 * self._scale(grid.device)  # continuous (x, y, z) voxel indices
        base = torch.floor(f)
        frac = f - base
        base = base.long()
        # Per axis: the two neighbouring indices (clamped into the grid) and their weights,
        # zero for a neighbour outside the grid; the 8 corners are their outer products.
        axis_index, axis_weight = [], []
        for a, n in enumerate((nx, ny, nz)):
            pair = torch.stack([base[..., a], base[..., a] + 1], -1)
            weight = torch.stack([1 - frac[..., a], frac[..., a]], -1)
            weight = weight * ((pair >= 0) & (pair < n))
            axis_index.append(pair.clamp(0, n - 1))
            axis_weight.append(weight)
        (ix, iy, iz), (wx, wy, wz) = axis_index, axis_weight
        flat = (iz[..., :, None, None] * ny + iy[..., None, :, None]) * nx \
            + ix[..., None, None, :]
        weights = (wz[..., :, None, None] * wy[..., None, :, None] * wx[..., None, None, :]) \
            * inside[..., None, None, None]
        return flat.reshape(count, -1), weights.reshape(count, -1)

    def _chunks(self) -> list[tuple[int, int]]:
        rows, cols = self.geometry.detector_shape
        total = self.geometry.num_views * rows * cols
        size = max(1, self.max_samples // self._num_samples())
        return [(first, min(size, total - first)) for first in range(0, total, size)]

    # -- the operator ------------------------------------------------------------------
    def _sampled(self, x: torch.Tensor, first: int, count: int) -> torch.Tensor:
        """Trilinear samples of x (B, 1, nz, ny, nx) along the chunk's rays, weighted and
        summed: (B, rays)."""
        grid, weights = self._grid(first, count)
        values = F.grid_sample(x, grid.expand(x.shape[0], -1, -1, -1, -1).to(x.dtype),
                               mode="bilinear", padding_mode="zeros", align_corners=True)
        return (values[:, 0, :, :, 0] * weights.to(x.dtype)).sum(dim=-1)

    def A(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        """(B, 1, nz, ny, nx) -> (B, 1, views, rows, cols)."""
        g = self.geometry
        out = torch.cat([self._sampled(x, first, count) for first, count in self._chunks()],
                        dim=1)
        return out.reshape(x.shape[0], 1, g.num_views, *g.detector_shape)

    def A_adjoint(self, y: torch.Tensor, **kwargs) -> torch.Tensor:
        """(B, 1, views, rows, cols) -> (B, 1, nz, ny, nx).

        On CPU: the gradient of the forward's grid sampling (its exact transpose; torch's CPU
        kernel accumulates in a fixed order). On CUDA, whose grid-sampling gradient uses
        atomic adds: the same trilinear weights scattered with index_add_.
        """
        g = self.geometry
        rays = y.reshape(y.shape[0], -1)
        if y.device.type == "cpu":
            x = torch.zeros((y.shape[0], 1, *g.volume_shape), dtype=y.dtype,
                            requires_grad=True)
            with torch.enable_grad():
                for first, count in self._chunks():
                    sampled = self._sampled(x, first, count)
                    sampled.backward(rays[:, first:first + count].detach())
            return x.grad.detach()
        return self.scatter_adjoint(y)

    def scatter_adjoint(self, y: torch.Tensor) -> torch.Tensor:
        """A^T y by scattering the trilinear weights (the CUDA path; works on any device)."""
        g = self.geometry
        rays = y.reshape(y.shape[0], -1)
        out = torch.zeros(y.shape[0], math.prod(g.volume_shape), dtype=y.dtype,
                          device=y.device)
        for first, count in self._chunks():
            indices, weights = self._samples(first, count)
            weights = weights.to(y.dtype)
            for b in range(y.shape[0]):
                values = weights * rays[b, first:first + count, None]
                out[b].index_add_(0, indices.reshape(-1), values.reshape(-1))
        return out.reshape(y.shape[0], 1, *g.volume_shape)


class AstraConeBeam(LinearPhysics):
    """ASTRA's GPU cone-beam projector (``cone_vec``) on the same geometry and layouts.

    ASTRA's back-projection is its matched transpose up to its own discretisation (not bit
    for bit); data round-trip through host memory.
    """

    def __init__(self, geometry: ConeGeometry, **kwargs) -> None:
        import astra

        if not astra.use_cuda():
            raise RuntimeError("ASTRA's cone-beam projector needs a CUDA device")
        super().__init__(**kwargs)
        self.geometry = geometry
        g = geometry
        nz, ny, nx = g.volume_shape
        self.vol_geom = astra.create_vol_geom(ny, nx, nz)
        low = [o - g.voxel_size / 2 for o in g.origin]
        for axis, n, start in zip("XYZ", (nx, ny, nz), low, strict=True):
            self.vol_geom["option"][f"WindowMin{axis}"] = start
            self.vol_geom["option"][f"WindowMax{axis}"] = start + n * g.voxel_size
        rows, cols = g.detector_shape
        self.proj_geom = astra.create_proj_geom("cone_vec", rows, cols, g.vectors)

    def A(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        import astra

        def project(volume: np.ndarray) -> np.ndarray:
            sid, sino = astra.create_sino3d_gpu(volume, self.proj_geom, self.vol_geom)
            astra.data3d.delete(sid)
            return np.transpose(sino, (1, 0, 2))  # (rows, views, cols) -> ours

        return per_item_on_host(x, project)

    def A_adjoint(self, y: torch.Tensor, **kwargs) -> torch.Tensor:
        import astra

        def back_project(sino: np.ndarray) -> np.ndarray:
            data = np.ascontiguousarray(np.transpose(sino, (1, 0, 2)))
            vid, volume = astra.create_backprojection3d_gpu(data, self.proj_geom,
                                                            self.vol_geom)
            astra.data3d.delete(vid)
            return volume

        return per_item_on_host(y, back_project)


class RtkConeBeam(LinearPhysics):
    """ITK-RTK's Joseph projector pair (CPU, multithreaded) on the same geometry and layouts.

    Each view's vectors become an RTK projection (source, detector centre, detector axes),
    which needs orthogonal detector axes; the back-projector is the forward's exact transpose
    and both are deterministic (measured: tools/conebeam_projectors.py). Tensors round-trip
    through host memory.
    """

    def __init__(self, geometry: ConeGeometry, **kwargs) -> None:
        import itk
        from itk import RTK as rtk

        super().__init__(**kwargs)
        self.geometry = geometry
        self.rtk_geometry = rtk.ThreeDCircularProjectionGeometry.New()
        for view, v in enumerate(geometry.vectors):
            u, w = v[6:9], v[9:12]
            added = self.rtk_geometry.AddProjection(
                itk.Point[itk.D, 3](v[0:3].tolist()), itk.Point[itk.D, 3](v[3:6].tolist()),
                itk.Vector[itk.D, 3]((u / np.linalg.norm(u)).tolist()),
                itk.Vector[itk.D, 3]((w / np.linalg.norm(w)).tolist()))
            if not added:
                raise ValueError(f"RTK cannot represent view {view}'s geometry vectors "
                                 f"(detector axes not orthogonal?)")
        rows, cols = geometry.detector_shape
        du, dv = (float(np.linalg.norm(geometry.vectors[0, a:a + 3])) for a in (6, 9))
        self.projection_frame = ([-(cols - 1) / 2 * du, -(rows - 1) / 2 * dv, 0.0],
                                 [du, dv, 1.0])
        self.volume_frame = (list(geometry.origin), [geometry.voxel_size] * 3)
        self.image_type = itk.Image[itk.F, 3]

    @staticmethod
    def _image(array: np.ndarray, frame: tuple[list, list]):
        import itk

        image = itk.image_from_array(np.ascontiguousarray(array, dtype=np.float32))
        image.SetOrigin(frame[0])
        image.SetSpacing(frame[1])
        return image

    def _run(self, kind: str, target: np.ndarray, target_frame, source: np.ndarray,
             source_frame) -> np.ndarray:
        import itk
        from itk import RTK as rtk

        projector = getattr(rtk, kind)[self.image_type, self.image_type].New()
        # The run's thread count (torch's, recorded in provenance), not ITK's own default.
        projector.SetNumberOfWorkUnits(max(1, torch.get_num_threads()))
        projector.SetInput(0, self._image(target, target_frame))
        projector.SetInput(1, self._image(source, source_frame))
        projector.SetGeometry(self.rtk_geometry)
        projector.Update()
        return itk.array_from_image(projector.GetOutput()).copy()

    def A(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        g = self.geometry
        empty = np.zeros((g.num_views, *g.detector_shape), dtype=np.float32)
        return per_item_on_host(x, lambda volume: self._run(
            "JosephForwardProjectionImageFilter", empty, self.projection_frame, volume,
            self.volume_frame))

    def A_adjoint(self, y: torch.Tensor, **kwargs) -> torch.Tensor:
        empty = np.zeros(self.geometry.volume_shape, dtype=np.float32)
        return per_item_on_host(y, lambda data: self._run(
            "JosephBackProjectionImageFilter", empty, self.volume_frame, data,
            self.projection_frame))


def make_projector(name: str, geometry: ConeGeometry) -> LinearPhysics:
    """The named cone-beam projector ('torch', 'rtk' or 'astra') for ``geometry``."""
    if name == "astra":
        return AstraConeBeam(geometry)
    if name == "rtk":
        return RtkConeBeam(geometry)
    if name == "torch":
        return TorchConeBeam(geometry)
    raise ValueError(f"unknown projector '{name}' (allowed: {', '.join(CONEBEAM_PROJECTORS)})")


def circular_vectors(num_views: int, source_distance: float, detector_distance: float,
                     pixel_size: float) -> np.ndarray:
    """cone_vec rows of a circular orbit around the z axis (source at ``source_distance`` from
    the origin, detector centre at ``detector_distance`` beyond it, square pixels)."""
    angles = 2 * np.pi * np.arange(num_views) / num_views
    cos, sin, zero = np.cos(angles), np.sin(angles), np.zeros(num_views)
    source = np.stack([sin * source_distance, -cos * source_distance, zero], 1)
    detector = np.stack([-sin * detector_distance, cos * detector_distance, zero], 1)
    u = np.stack([cos * pixel_size, sin * pixel_size, zero], 1)
    v = np.stack([zero, zero, np.full(num_views, pixel_size)], 1)
    return np.concatenate([source, detector, u, v], axis=1)
