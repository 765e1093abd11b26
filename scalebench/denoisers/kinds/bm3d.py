"""BM3D (Dabov et al. 2007; Mäkinen, Azzari & Foi's ``bm3d`` package, CPU) through deepinv's
BM3D wrapper (use_legacy=True), sigma being the noise level; no weights, 2D only, grey or
colour. On CUDA the image is denoised on the host: the package runs on the CPU only.

Its output depends on the whole image: an impulse at one pixel changes outputs at every
distance (0.09 at 60 pixels and more on a 128^2 random image), so no overlap makes tiles
exact (receptive_radius None); tiling BM3D is an approximation, its seams the price."""

from __future__ import annotations

from scalebench.denoisers.spec import DenoiserSpec


def build(channels: int, weights, device):
    from scalebench.denoisers.modules import HostBM3D

    return HostBM3D().to(device)


SPEC = DenoiserSpec("bm3d", "BM3D block matching and 3D filtering (the bm3d package, CPU), "
                            "no weights", size_multiple=1, receptive_radius=None,
                    volumes=False, build=build)
