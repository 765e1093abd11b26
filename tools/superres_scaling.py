"""Multi-frame super-resolution up to 16 megapixels: set-up and one gradient step.

Per size, in a fresh child process: build the problem (photograph resampled to the size,
num_frames operators, measurements), then time one gradient step A^T(A x - y) with its peak
RSS, and report the bytes the operators store. Beside it, at sizes up to --deepinv-max-size,
the bytes deepinv's Downsampling stores for the same frames (its precomputed Fourier
transforms of the filter), which is what the lean operator avoids.

    python tools/superres_scaling.py [--sizes 1024 4096] [--frames 4] [--deepinv-max-size 1024]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time


def stored_mib(operators) -> float:
    return sum(b.numel() * b.element_size() for op in operators for b in op.buffers()) / 2**20


def measure(size: int, frames: int, deepinv_max: int) -> dict:
    import torch
    from deepinv.physics import Downsampling

    from scalebench.problems import setup_problem
    from scalebench.problems.multiframe_superres import rotated_gaussian_kernel
    from scalebench.rank.profiling import HostPeakMemory

    memory = HostPeakMemory()  # peaks from here on
    start = time.perf_counter()
    problem = setup_problem("multiframe_superres", image_size=size, num_frames=frames).build()
    build_s, build_peak = time.perf_counter() - start, memory.read_mib()
    memory.reset()
    start = time.perf_counter()
    with torch.no_grad():
        physics = problem.physics
        physics.A_adjoint(physics.A(problem.x_true) - problem.y)
    row = {"size": size, "megapixels": size * size / 1e6, "build_s": build_s,
           "build_peak_mib": build_peak, "grad_s": time.perf_counter() - start,
           "grad_peak_mib": memory.read_mib(),
           "operators_mib": stored_mib(physics.physics_list)}
    if size <= deepinv_max:
        reference = [Downsampling(img_size=(3, size, size), factor=2, padding="circular",
                                  filter=rotated_gaussian_kernel(1.5, math.pi * k / frames))
                     for k in range(frames)]
        row["deepinv_operators_mib"] = stored_mib(reference)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--deepinv-max-size", type=int, default=1024)
    parser.add_argument("--child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return 0
    print(f"{'size':>6} {'MP':>5} {'build_s':>8} {'build_MiB':>9} {'grad_s':>7} "
          f"{'grad_MiB':>8} {'ops_MiB':>8} {'deepinv_ops_MiB':>15}")
    for size in args.sizes:
        done = subprocess.run([sys.executable, __file__, "--child", str(size),
                               str(args.frames), str(args.deepinv_max_size)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{size:>5}² failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        deepinv = f"{r['deepinv_operators_mib']:15.1f}" if "deepinv_operators_mib" in r \
            else f"{'not built':>15}"
        print(f"{size:>5}² {r['megapixels']:5.1f} {r['build_s']:8.1f} {r['build_peak_mib']:9.0f}"
              f" {r['grad_s']:7.2f} {r['grad_peak_mib']:8.0f} {r['operators_mib']:8.3f} {deepinv}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
