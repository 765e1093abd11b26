"""Time and peak memory of PnP on tomography_2d at growing sizes, per projector.

Each (size, projector) runs in a fresh child process, so that every peak is its own: the
child sets the problem up (phantom, operators, measurements), estimates ||A||^2 (read from
the on-disk cache when a valid entry exists, else by Lanczos and then cached:
scalebench.rank.operator_norm), takes the adjoint initial estimate and runs ITERATIONS PnP
iterations with the TV denoiser through scalebench's own loop and profiler. Printed per row:
set-up seconds (problem build, operator norm and where it came from), seconds and peak host
RSS of the gradient step and of the denoiser per iteration (median over the iterations,
from the profiler's VmHWM resets), and the child's whole-life peak RSS. The target line
checks the largest size against an 8 GiB whole-life peak.

deepinv's own Tomography stores angles x 2 x ceil(sqrt2 N)^2 floats of sampling grids (4 GiB
at 512^2/512 angles, about 32 GiB at 1024^2/1024 angles) and is run only up to
--deepinv-max-size (default 512: larger sizes do not fit beside other jobs on a 24 GiB host).

    python tools/tomography_scaling.py [--sizes 512 1024 2048] [--angles N (default: = size)]
        [--projectors auto torch deepinv] [--iterations 2] [--cold-cache] [--deepinv-max-size 512]
        [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_SIZE, TARGET_PEAK_GIB = 2048, 8.0


def measure(size: int, angles: int, projector: str, iterations: int, device: str) -> dict:
    """One configuration, in this process: set-up and per-iteration figures."""
    import torch

    from scalebench.denoisers.networks import build_denoiser
    from scalebench.loops.inference_parameters import pnp_parameters
    from scalebench.loops.pnp import PnPLoop
    from scalebench.problems import setup_problem
    from scalebench.problems.tomography_2d import resolve_projector
    from scalebench.rank.determinism import apply_determinism
    from scalebench.rank.metrics import psnr
    from scalebench.rank.profiling import HostPeakMemory, StepProfiler

    apply_determinism(True, seed=0)
    memory = HostPeakMemory()  # VmHWM since its last reset: this line, then the profiler's
    start = time.perf_counter()
    setup = setup_problem("tomography_2d", image_size=size, num_angles=angles,
                          projector=projector, noise_level=0.01)
    problem = setup.build(device=device)
    build_s = time.perf_counter() - start
    peaks = [memory.read_mib()]  # the build's; the profiler resets the peak from here on
    profiler = StepProfiler(torch.device(device))
    loop = PnPLoop(problem, build_denoiser("tv", 1, device=device),
                   pnp_parameters(denoiser_sigma=0.01), profiler)
    setup_s = time.perf_counter() - start
    peaks.append(memory.read_mib())
    psnr_start = psnr(loop.x, problem.x_true)
    steps: dict[str, list[float]] = {}
    for _ in range(iterations):
        loop.iterate()
        for key, value in profiler.last.items():
            steps.setdefault(key, []).append(value)
    return {
        "size": size, "angles": angles, "projector": resolve_projector(projector),
        "build_s": build_s, "setup_s": setup_s,
        "norm_s": loop.setup_figures["operator_norm_time_s"],
        "norm_iterations": loop.setup_figures["operator_norm_iterations"],
        **{key: statistics.median(values) for key, values in steps.items()},
        "psnr_start": psnr_start, "psnr_end": psnr(loop.x, problem.x_true),
        "peak_rss_mib": max(peaks + [v for k, vs in steps.items()
                                     if k.endswith("_peak_host_rss_mib") for v in vs]),
    }


def run_child(size: int, angles: int, projector: str, iterations: int, device: str,
              environment: dict) -> dict:
    command = [sys.executable, __file__, "--child", str(size), str(angles), projector,
               str(iterations), device]
    done = subprocess.run(command, capture_output=True, text=True, env=environment,
                          check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"size": size, "angles": angles, "projector": projector, "error": tail}
    return json.loads(done.stdout.strip().splitlines()[-1])


def row_text(row: dict) -> str:
    head = f"{row['size']:>5}² {row['angles']:>5} {row['projector']:>8}"
    if "error" in row:
        return f"{head}  failed: {row['error']}"
    return (f"{head} {row['build_s']:8.1f} {row['norm_s']:8.1f} ({row['norm_iterations']:>2} it)"
            f" {row['grad_time_s']:8.2f} {row['grad_peak_host_rss_mib']:9.0f}"
            f" {row['denoise_time_s']:8.2f} {row['denoise_peak_host_rss_mib']:9.0f}"
            f" {row['peak_rss_mib']:9.0f} {row['psnr_start']:6.2f}->{row['psnr_end']:5.2f}"
            + "".join(f" {key}={row[key]:.0f}" for key in row if key.endswith("cuda_alloc_mib")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--angles", type=int, default=0, help="0: as many as the size")
    parser.add_argument("--projectors", nargs="+", default=["auto", "torch", "deepinv"])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--deepinv-max-size", type=int, default=512)
    parser.add_argument("--cold-cache", action="store_true",
                        help="compute every operator norm (fresh cache folder)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="cuda: the astra projector runs ASTRA's CUDA projector; figures "
                             "then include the peak CUDA allocation per step")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        size, angles, projector, iterations, device = (*args.child, "cpu")[:5]
        print(json.dumps(measure(int(size), int(angles), projector, int(iterations), device)))
        return 0
    environment = dict(os.environ)
    if args.cold_cache:
        environment["SCALEBENCH_CACHE"] = tempfile.mkdtemp(prefix="scalebench-norms-")
    print(f"{'size':>6} {'angles':>5} {'proj':>8} {'build_s':>8} {'norm_s':>8} {'':5} "
          f"{'grad_s':>8} {'grad_MiB':>9} {'tv_s':>8} {'tv_MiB':>9} {'peak_MiB':>9} "
          f"{'PSNR start->end':>15}")
    rows = []
    for size in args.sizes:
        for projector in args.projectors:
            angles = args.angles or size
            if projector == "deepinv" and size > args.deepinv_max_size:
                print(f"{size:>5}² {angles:>5} {'deepinv':>8}  not run: its sampling grids "
                      f"need {angles * 2 * (1.415 * size) ** 2 * 4 / 2**30:.0f} GiB")
                continue
            row = run_child(size, angles, projector, args.iterations, args.device,
                            environment)
            rows.append(row)
            print(row_text(row), flush=True)
    target = [r for r in rows if r["size"] == TARGET_SIZE and "error" not in r]
    for row in target:
        peak_gib = row["peak_rss_mib"] / 1024.0
        verdict = "PASS" if peak_gib < TARGET_PEAK_GIB else "FAIL"
        print(f"target {TARGET_SIZE}², {row['angles']} angles, {row['projector']}: whole-run "
              f"peak {peak_gib:.2f} GiB (limit {TARGET_PEAK_GIB:.0f} GiB): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
