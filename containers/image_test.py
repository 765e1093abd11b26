"""Self-test of a scalebench image (Apptainer %test, `docker run IMAGE scalebench-image-test`).

1. every pinned package imports, at the version of constraints.txt;
2. a tiny CPU run of each benchmark (inference, training) goes through `scalebench run`
   (about 30 s each);
3. with a GPU: a CUDA computation matches the CPU, and ASTRA's GPU projector matches its CPU
   projector on data that came from a torch CUDA tensor. Without one, says they were skipped.
Exit status 0 when every check passes.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from provenance.process import PACKAGES

SOURCE = Path(__file__).resolve().parent.parent
# Distribution -> module of every pinned package (provenance's fields are the module names).
MODULES = {distribution: module for module, distribution in PACKAGES.items()}
TINY = {  # benchmark folder -> a seconds-long config of it
    "benchmark_inference": """\
objective: [imaging_inverse_problem]
dataset:
  - tomography_2d: {image_size: 32, num_angles: 12, noise_level: 0.05}
solver:
  - pnp: {denoiser: tv, max_iter: 3, device: cpu}
n-repetitions: 1
max-runs: 100
timeout: 300
""",
    "benchmark_training": """\
objective: [supervised_training]
dataset:
  - synthetic: {image_size: 32, task: denoising}
solver:
  - unrolled_pgd: {max_iter: 2, device: cpu, num_stages: 2, denoiser_width: 4,
                   denoiser_depth: 2, patch_size: 16, batch_size: 2}
n-repetitions: 1
max-runs: 100
timeout: 300
"""}


def locked_versions() -> dict[str, str]:
    lines = (SOURCE / "constraints.txt").read_text().splitlines()
    pairs = (line.split("==") for line in lines if "==" in line and not line.startswith("#"))
    return {name.lower(): version.strip() for name, version in pairs}


def check_imports() -> None:
    locked = locked_versions()
    for distribution, module in MODULES.items():
        importlib.import_module(module)
        installed = metadata.version(distribution)
        if locked.get(distribution) != installed:
            raise SystemExit(f"image test: {distribution} {installed} installed but "
                             f"constraints.txt locks {locked.get(distribution)}")
        print(f"ok: import {module} ({distribution} {installed})")


def check_tiny_runs() -> None:
    for name, text in TINY.items():
        if not (SOURCE / name).is_dir():
            raise SystemExit(f"image test: the image has no {SOURCE / name}")
        # A writable copy: the image's own folder may be read-only.
        with tempfile.TemporaryDirectory(prefix="scalebench-image-test-") as folder:
            benchmark = Path(folder) / name
            shutil.copytree(SOURCE / name, benchmark, symlinks=False,
                            ignore=shutil.ignore_patterns("outputs", "__pycache__"))
            config = Path(folder) / "tiny.yml"
            config.write_text(text)
            command = ["scalebench", "run", str(config), "--benchmark", str(benchmark),
                       "--output", "image_test"]
            status = subprocess.run(command, check=False, stdout=subprocess.DEVNULL).returncode
            if status != 0 or not (benchmark / "outputs" / "image_test.parquet").is_file():
                raise SystemExit(f"image test: tiny CPU run of {name} failed (exit status "
                                 f"{status})")
        print(f"ok: tiny CPU run of {name} (scalebench run)")


def check_gpu() -> None:
    import astra
    import numpy as np
    import torch

    if not torch.cuda.is_available():
        print("skipped: no GPU visible, CUDA and ASTRA-GPU checks not run")
        return
    a = torch.randn(256, 256, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    if not torch.allclose((a.cuda() @ a.cuda()).cpu(), a @ a, rtol=1e-10, atol=1e-10):
        raise SystemExit("image test: CUDA matmul disagrees with the CPU")
    print(f"ok: CUDA {torch.version.cuda} on {torch.cuda.get_device_name(0)}")
    if not astra.use_cuda():
        raise SystemExit("image test: a GPU is visible but ASTRA cannot use CUDA")
    image = torch.rand(64, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    volume = image.cpu().numpy().astype(np.float32)
    vol_geom = astra.create_vol_geom(64, 64)
    proj_geom = astra.create_proj_geom("parallel", 1.0, 96, np.linspace(0, np.pi, 45, False))
    sinograms = {}
    for kind in ("cuda", "linear"):
        projector = astra.create_projector(kind, proj_geom, vol_geom)
        sinogram_id, sinograms[kind] = astra.create_sino(volume, projector)
        astra.data2d.delete(sinogram_id)
        astra.projector.delete(projector)
    error = np.abs(sinograms["cuda"] - sinograms["linear"]).max() / sinograms["linear"].max()
    if error > 0.02:
        raise SystemExit(f"image test: ASTRA GPU and CPU projections differ by {error:.3g}")
    print(f"ok: ASTRA GPU projector (relative difference to CPU {error:.2g})")


def main() -> None:
    check_imports()
    check_tiny_runs()
    check_gpu()
    print("image test passed")


if __name__ == "__main__":
    main()
    sys.exit(0)
