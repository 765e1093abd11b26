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

    python -m tools.tomography_scaling [--sizes 512 1024 2048] [--angles N (default: = size)]
        [--projectors auto torch deepinv] [--iterations 2] [--cold-cache] [--deepinv-max-size 512]
        [--device cpu|cuda]
"""

from __future__ import annotations

import os
import sys
import tempfile

from tools.measuring import (
    ChildFailed,
    Stopwatch,
    Table,
    add_child,
    add_device,
    add_iterations,
    add_sizes,
    child_figures,
    median,
    print_figures,
    tool_parser,
)

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
    with Stopwatch() as setup_watch:
        with Stopwatch() as build:
            setup = setup_problem("tomography_2d", image_size=size, num_angles=angles,
                                  projector=projector, noise_level=0.01)
            problem = setup.build(device=device)
        peaks = [memory.read_mib()]  # the build's; the profiler resets the peak from here on
        profiler = StepProfiler(torch.device(device))
        loop = PnPLoop(problem, build_denoiser("tv", 1, device=device),
                       pnp_parameters(denoiser_sigma=0.01), profiler)
    peaks.append(memory.read_mib())
    psnr_start = psnr(loop.x, problem.x_true)
    steps: dict[str, list[float]] = {}
    for _ in range(iterations):
        loop.iterate()
        for key, value in profiler.last.items():
            steps.setdefault(key, []).append(value)
    return {
        "size": size, "angles": angles, "projector": resolve_projector(projector),
        "build_s": build.seconds, "setup_s": setup_watch.seconds,
        "norm_s": loop.setup_figures["operator_norm_time_s"],
        "norm_iterations": loop.setup_figures["operator_norm_iterations"],
        **{key: median(values) for key, values in steps.items()},
        "psnr_start": psnr_start, "psnr_end": psnr(loop.x, problem.x_true),
        "peak_rss_mib": max(peaks + [v for k, vs in steps.items()
                                     if k.endswith("_peak_host_rss_mib") for v in vs]),
    }


def run_child(size: int, angles: int, projector: str, iterations: int, device: str,
              environment: dict) -> dict:
    try:
        return child_figures(__spec__.name, size, angles, projector, iterations, device,
                             env=environment)
    except ChildFailed as error:
        return {"size": size, "angles": angles, "projector": projector, "error": str(error)}


COLUMNS = ("size", "angles", "proj", "build_s", "norm_s", "norm its", "grad_s", "grad_MiB",
           "tv_s", "tv_MiB", "peak_MiB", "PSNR start->end", "peak CUDA MiB")


def row_cells(row: dict) -> list[str]:
    head = [f"{row['size']}²", str(row["angles"]), row["projector"]]
    if "error" in row:
        return [*head, f"failed: {row['error']}"]
    return [*head, f"{row['build_s']:.1f}", f"{row['norm_s']:.1f}", str(row["norm_iterations"]),
            f"{row['grad_time_s']:.2f}", f"{row['grad_peak_host_rss_mib']:.0f}",
            f"{row['denoise_time_s']:.2f}", f"{row['denoise_peak_host_rss_mib']:.0f}",
            f"{row['peak_rss_mib']:.0f}", f"{row['psnr_start']:.2f}->{row['psnr_end']:.2f}",
            " ".join(f"{key}={row[key]:.0f}" for key in row if key.endswith("cuda_alloc_mib"))]


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    add_sizes(parser, [512, 1024, 2048])
    parser.add_argument("--angles", type=int, default=0, help="0: as many as the size")
    parser.add_argument("--projectors", nargs="+", default=["auto", "torch", "deepinv"])
    add_iterations(parser, 2, "PnP iterations per configuration")
    parser.add_argument("--deepinv-max-size", type=int, default=512)
    parser.add_argument("--cold-cache", action="store_true",
                        help="compute every operator norm (fresh cache folder)")
    add_device(parser, help="cuda: the astra projector runs ASTRA's CUDA projector; figures "
                            "then include the peak CUDA allocation per step")
    add_child(parser)
    args = parser.parse_args(argv)
    if args.child:
        size, angles, projector, iterations, device = (*args.child, "cpu")[:5]
        print_figures(measure(int(size), int(angles), projector, int(iterations), device))
        return 0
    environment = dict(os.environ)
    if args.cold_cache:
        environment["SCALEBENCH_CACHE"] = tempfile.mkdtemp(prefix="scalebench-norms-")
    table = Table(*COLUMNS)
    table.header()
    rows = []
    for size in args.sizes:
        for projector in args.projectors:
            angles = args.angles or size
            if projector == "deepinv" and size > args.deepinv_max_size:
                table.row(f"{size}²", angles, "deepinv", "not run: its sampling grids need "
                          f"{angles * 2 * (1.415 * size) ** 2 * 4 / 2**30:.0f} GiB")
                continue
            row = run_child(size, angles, projector, args.iterations, args.device,
                            environment)
            rows.append(row)
            table.row(*row_cells(row))
    target = [r for r in rows if r["size"] == TARGET_SIZE and "error" not in r]
    for row in target:
        peak_gib = row["peak_rss_mib"] / 1024.0
        verdict = "PASS" if peak_gib < TARGET_PEAK_GIB else "FAIL"
        print(f"target {TARGET_SIZE}², {row['angles']} angles, {row['projector']}: whole-run "
              f"peak {peak_gib:.2f} GiB (limit {TARGET_PEAK_GIB:.0f} GiB): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
