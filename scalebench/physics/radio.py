"""The radio-interferometric measurement operator: weighted visibilities of a sky image.

For a sky image x (N x N pixels, pixel (p, q) at direction cosines
l = (q - N/2) * cell, m = (p - N/2) * cell) and baselines (u_j, v_j) in wavelengths, the
visibilities are the 2D Fourier samples

    V_j(x) = sum_{p,q} x[p, q] * exp(-2 i pi (u_j l + v_j m))

(narrow field: the w term and the 1/n factor are neglected). The operator returns
sqrt(w_j) V_j(x) for per-visibility weights w_j, as a real tensor of shape (B, 2, M) holding
the real and imaginary parts. Its adjoint for the real inner product maps y to
Re(sum_j sqrt(w_j) (y_re + i y_im)_j exp(+2 i pi (u_j l + v_j m))), an image; with weights
summing to one, A^T A responds with 1 to a unit point source at the phase centre, so A^T y
is the dirty image.

Coordinates are handed over in cycles per pixel (u_j * cell, v_j * cell), each within
[-1/2, 1/2]. Four libraries compute the same transform (``BACKENDS``): a direct DFT (exact,
O(M N^2), the reference), ducc0's wgridder, finufft (cufinufft for CUDA tensors) and
deepinv's RadioInterferometry (torchkbnufft). ``auto`` takes the fastest accurate one
installed for the device (measured by tools/radio_operators.py): ducc0 on the CPU;
cufinufft, else deepinv's, on CUDA. In deterministic mode (torch's deterministic algorithms
on) the CPU adjoints grid with one thread, which makes them bit-reproducible.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from deepinv.physics import LinearPhysics

from scalebench.physics.backends import BACKENDS, resolve_backend

NUFFT_EPSILON = 1e-5  # requested relative accuracy of the gridding libraries (float32 floor)
SPEED_OF_LIGHT = 299_792_458.0  # m/s; ducc0 takes uvw in metres with frequencies
DFT_CHUNK_ELEMENTS = 1 << 22  # visibilities x pixels per DFT block (bounds its memory)


def _threads() -> int:
    return max(1, torch.get_num_threads())


def _gridding_threads() -> int:
    """Threads of the adjoints (gridding), one in deterministic mode: ducc0's threads add
    into the grid in a varying order, so only one thread gives bit-for-bit re-runs."""
    return 1 if torch.are_deterministic_algorithms_enabled() else _threads()


class DirectFourier:
    """The exact sums, in blocks of visibilities; O(M N^2) work."""

    def __init__(self, uv: torch.Tensor, image_size: int) -> None:
        offsets = torch.arange(image_size, dtype=torch.float64, device=uv.device)
        self.offsets = offsets - image_size // 2
        self.uv = uv
        self.rows = max(1, DFT_CHUNK_ELEMENTS // (image_size * image_size))

    def _phases(self, block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # exp(-2 i pi u l) along columns, exp(-2 i pi v m) along rows: (rows, N) each.
        angle = -2 * math.pi * block[:, :, None] * self.offsets
        phases = torch.polar(torch.ones_like(angle), angle)
        return phases[:, 0], phases[:, 1]

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        image = image.to(torch.complex128)
        parts = []
        for block in self.uv.split(self.rows):
            along_u, along_v = self._phases(block)
            parts.append(torch.einsum("bpq,jq,jp->bj", image, along_u, along_v))
        return torch.cat(parts, dim=1)

    def adjoint(self, vis: torch.Tensor) -> torch.Tensor:
        vis = vis.to(torch.complex128)
        image = 0
        for block, part in zip(self.uv.split(self.rows), vis.split(self.rows, dim=1),
                               strict=True):
            along_u, along_v = self._phases(block)
            image = image + torch.einsum("bj,jq,jp->bpq", part, along_u.conj(), along_v.conj())
        return image.real


class Ducc0Gridder:
    """ducc0's wgridder (w = 0, no n term); CPU only: CUDA tensors go through host memory."""

    def __init__(self, uv: torch.Tensor, image_size: int) -> None:
        # With frequency c, uvw in metres equals uvw in wavelengths; one pixel is one unit.
        uv = uv.detach().cpu().numpy().astype(np.float64)
        self.uvw = np.ascontiguousarray(np.column_stack([uv, np.zeros(len(uv))]))
        self.freq = np.array([SPEED_OF_LIGHT])
        self.image_size = image_size
        self.common = dict(pixsize_x=1.0, pixsize_y=1.0, epsilon=NUFFT_EPSILON,
                           do_wgridding=False, divide_by_n=False)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        from ducc0.wgridder.experimental import dirty2vis

        pixels = image.detach().cpu().numpy()
        # ducc0's first image axis goes with u: hand it the columns-first (transposed) image.
        vis = [dirty2vis(uvw=self.uvw, freq=self.freq, dirty=np.ascontiguousarray(plane.T),
                         nthreads=_threads(), **self.common)[:, 0] for plane in pixels]
        return torch.from_numpy(np.stack(vis)).to(image.device)

    def adjoint(self, vis: torch.Tensor) -> torch.Tensor:
        from ducc0.wgridder.experimental import vis2dirty

        samples = vis.detach().cpu().numpy()
        size = self.image_size
        images = [vis2dirty(uvw=self.uvw, freq=self.freq, vis=np.ascontiguousarray(v[:, None]),
                            npix_x=size, npix_y=size, nthreads=_gridding_threads(),
                            **self.common).T
                  for v in samples]
        return torch.from_numpy(np.ascontiguousarray(np.stack(images))).to(vis.device)


class FinufftTransform:
    """finufft type 2 (forward) and type 1 (adjoint) plans; cufinufft for CUDA tensors.

    Plans (one per precision, direction and thread count) are made and given the points once,
    then reused. On CUDA the type 1 spreading adds with atomics: not bit-reproducible.
    """

    def __init__(self, uv: torch.Tensor, image_size: int) -> None:
        self.image_size = image_size
        self.cuda = uv.device.type == "cuda"
        # Rows go with v, columns with u; mode k of N is array index k + N/2.
        self.angles = (2 * math.pi * uv.flip(1)).contiguous()
        self.plans: dict[tuple[int, torch.dtype, int], tuple] = {}

    def _library(self):
        if self.cuda:
            try:
                import cufinufft
            except ImportError:
                raise RuntimeError("backend 'finufft' on CUDA needs cufinufft "
                                   "(pip install cufinufft)") from None
            return cufinufft
        import finufft
        return finufft

    def _plan(self, nufft_type: int, complex_type: torch.dtype):
        threads = _threads() if nufft_type == 2 else _gridding_threads()
        key = (nufft_type, complex_type, threads)
        if key not in self.plans:
            real = torch.float32 if complex_type == torch.complex64 else torch.float64
            options = {} if self.cuda else {"nthreads": threads}
            plan = self._library().Plan(nufft_type, (self.image_size, self.image_size),
                                        eps=NUFFT_EPSILON, isign=-1 if nufft_type == 2 else 1,
                                        dtype=str(complex_type).removeprefix("torch."),
                                        **options)
            points = [axis.contiguous() for axis in self.angles.to(real).unbind(1)]
            if not self.cuda:
                points = [axis.numpy() for axis in points]
            plan.setpts(*points)
            self.plans[key] = (plan, points)  # the plan reads the points it was given
        return self.plans[key][0]

    def _execute(self, nufft_type: int, data: torch.Tensor) -> torch.Tensor:
        plan = self._plan(nufft_type, data.dtype)
        if self.cuda:
            return torch.stack([plan.execute(item.contiguous()) for item in data])
        return torch.from_numpy(np.stack([plan.execute(item.numpy()) for item in data]))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        complex_type = torch.complex128 if image.dtype == torch.float64 else torch.complex64
        return self._execute(2, image.detach().to(complex_type))

    def adjoint(self, vis: torch.Tensor) -> torch.Tensor:
        return self._execute(1, vis.detach()).real


class TorchKbNufft:
    """deepinv's RadioInterferometry (torchkbnufft), unweighted and rescaled to the sums.

    Its output scale is that of an orthonormal transform on the oversampled grid up to
    512 x 512 images but 1/(2N) of that from 1024 x 1024 on (deepinv 0.5, torchkbnufft 1.5),
    so the scale is taken from its response to a unit point source at the phase centre,
    whose visibilities are all 1.
    """

    def __init__(self, uv: torch.Tensor, image_size: int) -> None:
        from deepinv.physics import RadioInterferometry

        # deepinv wants (2, M) angles in radians, first row along image rows (v).
        angles = (2 * math.pi * uv.flip(1)).T.to(torch.float32).contiguous()
        self.physics = RadioInterferometry((image_size, image_size), angles,
                                           device=uv.device)
        centre = torch.zeros((1, 1, image_size, image_size), device=uv.device)
        centre[..., image_size // 2, image_size // 2] = 1.0
        with torch.no_grad():
            self.scale = 1.0 / float(self.physics.A(centre).real.mean())

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.physics.A(image[:, None].float())[:, 0] * self.scale

    def adjoint(self, vis: torch.Tensor) -> torch.Tensor:
        return self.physics.A_adjoint(vis[:, None].to(torch.complex64))[:, 0] * self.scale


TRANSFORMS = {"dft": DirectFourier, "ducc0": Ducc0Gridder, "finufft": FinufftTransform,
              "torchkbnufft": TorchKbNufft}


class _Linear(torch.autograd.Function):
    """A x (or A^T y when ``transposed``) with the other one as its backward, so that
    gradients flow through every library."""

    @staticmethod
    def forward(ctx, value: torch.Tensor, operator: VisibilityOperator,
                transposed: bool) -> torch.Tensor:
        ctx.operator, ctx.transposed = operator, transposed
        return operator.apply_linear(value, transposed)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.operator.apply_linear(grad, not ctx.transposed), None, None


class VisibilityOperator(LinearPhysics):
    """Weighted visibilities of an (B, 1, N, N) image, as (B, 2, M) real and imaginary parts.

    ``uv``: (M, 2) baseline coordinates in cycles per pixel, each in [-1/2, 1/2];
    ``weights``: (M,) non-negative visibility weights; ``backend``: one of ``BACKENDS``.
    The transform of the operator's device is built on first use and kept.
    """

    def __init__(self, uv: torch.Tensor, weights: torch.Tensor, image_size: int,
                 backend: str = "auto", **kwargs) -> None:
        super().__init__(**kwargs)
        if backend not in BACKENDS:
            raise ValueError(f"operator must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if uv.ndim != 2 or uv.shape[1] != 2 or uv.shape[0] != weights.numel():
            raise ValueError("uv must be (M, 2) with one weight per row")
        if uv.numel() and float(uv.abs().max()) > 0.5:
            raise ValueError("uv must lie within [-1/2, 1/2] cycles per pixel")
        self.register_buffer("uv", uv.to(torch.float64))
        self.register_buffer("sqrt_weights", weights.to(torch.float64).sqrt())
        self.image_size = image_size
        self.backend = backend
        self._transforms: dict[tuple[str, str], object] = {}

    @property
    def library(self) -> str:
        """The library that computes the transform on the operator's device."""
        return resolve_backend(self.backend, self.uv.device)

    def _transform(self):
        key = (str(self.uv.device), self.library)
        if key not in self._transforms:
            self._transforms[key] = TRANSFORMS[key[1]](self.uv, self.image_size)
        return self._transforms[key]

    def apply_forward(self, x: torch.Tensor) -> torch.Tensor:
        vis = self._transform().forward(x[:, 0]) * self.sqrt_weights
        return torch.stack([vis.real, vis.imag], dim=1).to(x.dtype)

    def apply_adjoint(self, y: torch.Tensor) -> torch.Tensor:
        vis = torch.complex(y[:, 0].double(), y[:, 1].double()) * self.sqrt_weights
        complex_type = torch.complex64 if y.dtype == torch.float32 else torch.complex128
        return self._transform().adjoint(vis.to(complex_type))[:, None].to(y.dtype)

    def apply_linear(self, value: torch.Tensor, transposed: bool) -> torch.Tensor:
        return self.apply_adjoint(value) if transposed else self.apply_forward(value)

    def A(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        return _Linear.apply(x, self, False)

    def A_adjoint(self, y: torch.Tensor, **kwargs) -> torch.Tensor:
        return _Linear.apply(y, self, True)
