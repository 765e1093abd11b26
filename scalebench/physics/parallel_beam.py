"""2D parallel-beam projectors whose memory grows like O(N^2 + angles x N).

Geometry (shared by every backend, and the same as deepinv's ``Tomography`` with
``circle=False``): an N x N image with unit pixels, ``W = ceil(sqrt(2) N)`` unit detector
cells, the sinogram laid out as deepinv's, (B, C, W, angles). A pixel at offset (dx, dy) from
the rotation centre projects onto detector coordinate ``t = c + cos(a) dx - sin(a) dy`` with
c = (W - 1) / 2; rays run along (sin a, cos a).

Discretisation of the torch projector: Joseph's method. A ray crosses the image row by row
(column by column when |sin a| > |cos a|), is sampled once per crossed row by linear
interpolation between the two nearest pixels, and each sample weighs the ray length per row,
1 / max(|cos a|, |sin a|). Its exact transpose is a pixel-driven gather: pixel q receives
from detector cells floor(t) and floor(t) + 1 the weight tent((j - t) / m) / m,
m = max(|cos a|, |sin a|). Both directions are gathers over chunks of angles summed in a
fixed order: no scatter, no atomics, the same bits on every run on a given device (CPU and
CUDA kernels may round their sums differently). deepinv
instead samples each ray at unit steps with bilinear interpolation (the same line integral,
another quadrature): the two agree to discretisation error, which
tests/test_tomography.py bounds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F
from deepinv.physics import LinearPhysics

from scalebench.physics.backends import astra_available
from scalebench.physics.host import per_item_on_host
from scalebench.rank.settings import process_settings

# Elements of the largest temporary per chunk of angles (samples x batch x channels):
# 2^24 float32 values, i.e. a few hundred MiB with the index and weight tensors. The process
# settings' ``chunk_elements``, read at each application, replace it: scalebench.experiment.
# capacity's probes lower it to tell the chunk's memory apart.
CHUNK_ELEMENTS = 2**24
PROJECTORS = ("torch", "astra")


def detector_count(image_size: int) -> int:
    """Detector cells covering the image's diagonal, as deepinv's Tomography (which rounds
    sqrt(2) to float32: the count differs from the exact ceiling for a few sizes)."""
    return int(torch.ceil(torch.sqrt(torch.tensor(2.0)) * image_size))


def rotation_centre(image_size: int) -> tuple[float, float]:
    """(centre in detector cells, centre in image pixels), deepinv's padding convention."""
    width = detector_count(image_size)
    pad_before = width // 2 - image_size // 2  # the image is zero-padded to W x W
    detector_centre = (width - 1) / 2.0
    return detector_centre, detector_centre - pad_before


def _angles_per_chunk(per_angle: int, chunk_elements: int | None = None) -> int:
    limit = chunk_elements or process_settings().chunk_elements or CHUNK_ELEMENTS
    return max(1, limit // max(1, per_angle))


def _chunks(num_angles: int, per_angle: int) -> list[slice]:
    step = _angles_per_chunk(per_angle)
    return [slice(s, min(s + step, num_angles)) for s in range(0, num_angles, step)]


def _forward_per_angle(image_size: int, batch_channels: int) -> int:
    return detector_count(image_size) * image_size * batch_channels


def _adjoint_per_angle(image_size: int, batch_channels: int) -> int:
    # Several temporaries per pixel and angle (coordinate, weights, int64 indices): counted
    # as at least 4 elements, so that both directions' chunks take alike memory.
    return image_size * image_size * max(4, batch_channels)


def workspace_elements(image_size: int, num_angles: int, batch_channels: int = 1,
                       chunk_elements: int | None = None) -> int:
    """Elements of the largest chunk one application of the torch projector over
    ``num_angles`` angles works on (forward or adjoint), with chunks of at most
    ``chunk_elements`` (default: the process settings', else ``CHUNK_ELEMENTS``): it grows
    with angles x N^2 until the chunk limit, then stays near it."""
    return max(min(num_angles, _angles_per_chunk(per_angle, chunk_elements)) * per_angle
               for per_angle in (_forward_per_angle(image_size, batch_channels),
                                 _adjoint_per_angle(image_size, batch_channels)))


def geometry_dtype(values: torch.Tensor) -> torch.dtype:
    """The precision of the ray geometry for ``values``: float64 for float64 data (exact
    adjoints in double), float32 otherwise (the bits of every float32 run)."""
    return torch.float64 if values.dtype == torch.float64 else torch.float32


class TorchParallelBeam:
    """Joseph forward projector and its exact transpose, in chunks of angles (any device)."""

    def __init__(self, image_size: int, angles_deg: torch.Tensor) -> None:
        self.size = image_size
        self.width = detector_count(image_size)
        self.det_centre, self.img_centre = rotation_centre(image_size)
        radians = angles_deg.double() * (math.pi / 180.0)
        self.cos, self.sin = torch.cos(radians), torch.sin(radians)
        self.rows = self.cos.abs() >= self.sin.abs()  # True: the ray is sampled row by row
        self.step = torch.maximum(self.cos.abs(), self.sin.abs())  # 1 / ray length per row

    def _sample_grid(self, chunk: slice, device: torch.device, dtype: torch.dtype
                     ) -> torch.Tensor:
        """Normalised (x, y) of every sample of the chunk's rays: (1, angles*W, N, 2), in
        ``dtype`` (grid_sample takes the image's).

        Sample r of ray j lies on image row r (or column r) at an affine function of (j, r),
        so the grid is two broadcast sums of per-angle coefficients.
        """
        n, c, o = self.size, self.det_centre, self.img_centre
        cos, sin, rows = self.cos[chunk], self.sin[chunk], self.rows[chunk]
        one, zero = torch.ones_like(cos), torch.zeros_like(cos)
        # rows: x = o + (j - c + sin (r - o)) / cos, y = r
        # columns: x = r, y = o + (cos (r - o) - (j - c)) / sin
        inv = 1.0 / torch.where(rows, cos, sin)
        coefficients = torch.stack([
            torch.where(rows, o - (c + sin * o) * inv, zero),   # x: constant
            torch.where(rows, inv, zero),                       # x: per detector cell j
            torch.where(rows, sin * inv, one),                  # x: per step r
            torch.where(rows, zero, o + (c - cos * o) * inv),   # y: constant
            torch.where(rows, zero, -inv),                      # y: per detector cell j
            torch.where(rows, one, cos * inv),                  # y: per step r
        ], dim=1) * (2.0 / (n - 1))
        coefficients[:, 0] -= 1.0
        coefficients[:, 3] -= 1.0
        k = coefficients.to(device=device, dtype=dtype)[:, :, None, None]
        j = torch.arange(self.width, dtype=dtype, device=device)[:, None]
        r = torch.arange(n, dtype=dtype, device=device)[None, :]
        grid = torch.empty(len(cos), self.width, n, 2, dtype=dtype, device=device)
        torch.add(k[:, 0] + k[:, 1] * j, k[:, 2] * r, out=grid[..., 0])
        torch.add(k[:, 3] + k[:, 4] * j, k[:, 5] * r, out=grid[..., 1])
        return grid.reshape(1, -1, n, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Sinogram (B, C, W, angles) of images x (B, C, N, N)."""
        batch, channels = x.shape[:2]
        parts = []
        for chunk in _chunks(len(self.cos), _forward_per_angle(self.size, batch * channels)):
            grid = self._sample_grid(chunk, x.device, geometry_dtype(x)).expand(
                batch, -1, -1, -1)
            samples = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros",
                                    align_corners=True)
            sums = samples.sum(-1).reshape(batch, channels, -1, self.width)
            parts.append(sums / self.step[chunk, None].to(sums))
        return torch.cat(parts, dim=2).transpose(-2, -1).contiguous()

    def adjoint(self, y: torch.Tensor) -> torch.Tensor:
        """Back-projection (B, C, N, N) of sinograms y (B, C, W, angles)."""
        batch, channels = y.shape[:2]
        n, device, dtype = self.size, y.device, geometry_dtype(y)
        offsets = torch.arange(n, dtype=dtype, device=device) - self.img_centre
        flat = y.reshape(batch * channels, self.width, -1)
        image = torch.zeros(batch * channels, n * n, dtype=y.dtype, device=device)
        for chunk in _chunks(len(self.cos), _adjoint_per_angle(n, batch * channels)):
            cos = self.cos[chunk, None, None].to(device=device, dtype=dtype)
            sin = self.sin[chunk, None, None].to(device=device, dtype=dtype)
            inv = 1.0 / self.step[chunk, None].to(device=device, dtype=dtype)
            # detector coordinate of every pixel: rows of the image vary dy, columns dx
            t = (self.det_centre + cos * offsets[None, None, :]) - sin * offsets[None, :, None]
            t = t.reshape(t.shape[0], -1)
            left = torch.floor(t)
            frac = t.sub_(left)
            # weights tent((j - t) / m) / m of cells floor(t) and floor(t) + 1
            w_left = torch.relu_(inv - inv * inv * frac)
            w_right = torch.relu_(frac.mul_(inv * inv).add_(inv - inv * inv))
            # cells shifted by one into a zero-padded sinogram: the edges need no mask
            index = left.add_(1).clamp_(0, self.width).long()
            index = index[None].expand(batch * channels, -1, -1)
            padded = F.pad(flat[:, :, chunk].transpose(1, 2), (1, 1))  # (BC, angles, W+2)
            part = torch.gather(padded, 2, index).mul_(w_left)
            part.addcmul_(torch.gather(padded, 2, index + 1), w_right)
            image += part.sum(1)
        return image.reshape(batch, channels, n, n)


# ASTRA's CPU projector runs on one thread: the angles are cut into this many blocks (fewer
# when there are fewer angles), each with its own projector, run on the threads the run has.
# The cut depends on the angle count only, and back-projections of the blocks are summed in
# block order, so the bits do not depend on the thread count.
ANGLE_BLOCKS = 32


def angle_blocks(num_angles: int) -> list[slice]:
    """Contiguous, near-equal slices of ``num_angles`` angles, ``min(num_angles,
    ANGLE_BLOCKS)`` of them."""
    count = min(num_angles, ANGLE_BLOCKS)
    edges = [num_angles * k // count for k in range(count + 1)]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]


@functools.cache
def thread_pool(threads: int) -> ThreadPoolExecutor:
    """A pool of ``threads`` workers, shared by every projector of the process (made on
    first use, kept for the process's life)."""
    return ThreadPoolExecutor(threads, thread_name_prefix="scalebench-astra")


class AstraParallelBeam:
    """ASTRA's 2D parallel-beam projector on the same geometry: on the CPU its 'linear'
    projector over blocks of angles (``angle_blocks``), run on ``torch.get_num_threads()``
    threads (ASTRA releases the GIL while it projects); on CUDA one projector."""

    def __init__(self, image_size: int, angles_deg: torch.Tensor, use_cuda: bool) -> None:
        import astra

        self.astra = astra
        self.size = image_size
        self.width = detector_count(image_size)
        # ASTRA rotates about the middle of its volume grid; ours may sit half a pixel off it
        # (deepinv's padding), which shifts the volume by that much (x right, y up).
        offset = rotation_centre(image_size)[1] - (image_size - 1) / 2.0
        half = image_size / 2.0
        angles = angles_deg.double().numpy() * (math.pi / 180.0)
        vectors = np.zeros((len(angles), 6))  # ray direction, detector centre, detector axis
        vectors[:, 0], vectors[:, 1] = np.sin(angles), -np.cos(angles)
        vectors[:, 4], vectors[:, 5] = np.cos(angles), np.sin(angles)
        self.volume = astra.create_vol_geom(image_size, image_size, -half - offset,
                                            half - offset, -half + offset, half + offset)
        kind = "cuda" if use_cuda else "linear"
        self.blocks = [slice(0, len(angles))] if use_cuda else angle_blocks(len(angles))
        self.geometries = [astra.create_proj_geom("parallel_vec", self.width, vectors[block])
                           for block in self.blocks]
        self.projectors = [astra.create_projector(kind, geometry, self.volume)
                           for geometry in self.geometries]

    def __del__(self) -> None:
        try:
            for projector in self.projectors:
                self.astra.projector.delete(projector)
        except Exception:  # noqa: BLE001 - the interpreter may be shutting down
            pass

    def _on_blocks(self, run) -> Iterator:
        """``run(block index)`` for every block, on the run's threads, results in order."""
        threads = min(torch.get_num_threads(), len(self.blocks))
        if threads <= 1:
            return map(run, range(len(self.blocks)))
        return thread_pool(threads).map(run, range(len(self.blocks)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def project(image: np.ndarray) -> np.ndarray:
            def block(k: int) -> np.ndarray:
                sino_id, sino = self.astra.create_sino(image, self.projectors[k])
                self.astra.data2d.delete(sino_id)
                return sino
            return np.concatenate(list(self._on_blocks(block)), axis=0).T  # (W, angles)
        return per_item_on_host(x, project)

    def adjoint(self, y: torch.Tensor) -> torch.Tensor:
        def back_project(sinogram: np.ndarray) -> np.ndarray:
            def block(k: int) -> np.ndarray:
                part = np.ascontiguousarray(sinogram[:, self.blocks[k]].T)
                sino_id = self.astra.data2d.create("-sino", self.geometries[k], part)
                vol_id, volume = self.astra.create_backprojection(sino_id, self.projectors[k])
                self.astra.data2d.delete([sino_id, vol_id])
                return volume
            parts = self._on_blocks(block)
            total = next(parts)
            for part in parts:  # block order, whatever order the threads finish in
                total += part
            return total
        return per_item_on_host(y, back_project)


class ParallelBeam2D(LinearPhysics):
    """deepinv physics of a 2D parallel-beam scan: A x = sinogram, A^T = exact transpose.

    ``projector``: 'torch' (chunked Joseph projector, any device, deterministic) or 'astra'
    (ASTRA's CPU 'linear' projector, or its CUDA projector when built on a CUDA device).
    Nothing proportional to angles x N^2 is ever stored.
    """

    def __init__(self, angles: torch.Tensor, img_width: int, projector: str = "torch",
                 device: torch.device | str = "cpu") -> None:
        super().__init__()
        if projector not in PROJECTORS:
            raise ValueError(f"projector must be one of {', '.join(PROJECTORS)}, "
                             f"got {projector!r}")
        self.register_buffer("angles", torch.as_tensor(angles, dtype=torch.float32))
        self.img_width = img_width
        self.projector = projector
        self._engines: dict[str, TorchParallelBeam | AstraParallelBeam] = {}
        self.to(device)

    def __getstate__(self) -> dict:
        # Projector engines hold native handles (ASTRA ids): copies build their own.
        return {**super().__getstate__(), "_engines": {}}

    @property
    def engine(self) -> TorchParallelBeam | AstraParallelBeam:
        """The projector for the device the operator is on (built on first use)."""
        kind = self.angles.device.type
        if kind not in self._engines:
            if self.projector == "astra" and kind == "cuda" and not astra_available(cuda=True):
                raise ValueError("projector 'astra' on a CUDA device needs an ASTRA build "
                                 "with CUDA (use projector 'torch')")
            angles = self.angles.detach().cpu()
            self._engines[kind] = TorchParallelBeam(self.img_width, angles) \
                if self.projector == "torch" else \
                AstraParallelBeam(self.img_width, angles, use_cuda=kind == "cuda")
        return self._engines[kind]

    def A(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        if tuple(x.shape[-2:]) != (self.img_width, self.img_width):
            raise ValueError(f"image of size {tuple(x.shape[-2:])} given to a "
                             f"{self.img_width} x {self.img_width} projector")
        return self.engine.forward(x)

    def A_adjoint(self, y: torch.Tensor, **kwargs) -> torch.Tensor:
        return self.engine.adjoint(y)
