"""Multi-frame super-resolution up to 16 megapixels: set-up and one gradient step.

Per size, in a fresh child process: build the problem (photograph resampled to the size,
num_frames operators, measurements), then time one gradient step A^T(A x - y) with its peak
RSS, and report the bytes the operators store. Beside it, at sizes up to --deepinv-max-size,
the bytes deepinv's Downsampling stores for the same frames (its precomputed Fourier
transforms of the filter), which is what the lean operator avoids.

    python -m tools.superres_scaling [--sizes 1024 4096] [--frames 4] [--deepinv-max-size 1024]
"""

from __future__ import annotations

import math
import sys

from tools.measuring import (
    ChildFailed,
    Stopwatch,
    Table,
    add_child,
    add_sizes,
    child_figures,
    print_figures,
    tool_parser,
)


def stored_mib(operators) -> float:
    return sum(b.numel() * b.element_size() for op in operators for b in op.buffers()) / 2**20


def measure(size: int, frames: int, deepinv_max: int) -> dict:
    import torch
    from deepinv.physics import Downsampling

    from scalebench.problems import setup_problem
    from scalebench.problems.multiframe_superres import rotated_gaussian_kernel
    from scalebench.rank.profiling import HostPeakMemory

    memory = HostPeakMemory()  # peaks from here on
    with Stopwatch() as build:
        problem = setup_problem("multiframe_superres", image_size=size, num_frames=frames).build()
    build_peak = memory.read_mib()
    memory.reset()
    with Stopwatch() as grad, torch.no_grad():
        physics = problem.physics
        physics.A_adjoint(physics.A(problem.x_true) - problem.y)
    row = {"size": size, "megapixels": size * size / 1e6, "build_s": build.seconds,
           "build_peak_mib": build_peak, "grad_s": grad.seconds,
           "grad_peak_mib": memory.read_mib(),
           "operators_mib": stored_mib(physics.physics_list)}
    if size <= deepinv_max:
        reference = [Downsampling(img_size=(3, size, size), factor=2, padding="circular",
                                  filter=rotated_gaussian_kernel(1.5, math.pi * k / frames))
                     for k in range(frames)]
        row["deepinv_operators_mib"] = stored_mib(reference)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    add_sizes(parser, [1024, 4096])
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--deepinv-max-size", type=int, default=1024)
    add_child(parser)
    args = parser.parse_args(argv)
    if args.child:
        print_figures(measure(*map(int, args.child)))
        return 0
    table = Table("size", "MP", "build_s", "build_MiB", "grad_s", "grad_MiB", "ops_MiB",
                  "deepinv_ops_MiB")
    table.header()
    for size in args.sizes:
        try:
            r = child_figures(__spec__.name, size, args.frames, args.deepinv_max_size)
        except ChildFailed as error:
            table.row(f"{size}²", f"failed: {error}")
            continue
        deepinv = f"{r['deepinv_operators_mib']:.1f}" if "deepinv_operators_mib" in r \
            else "not built"
        table.row(f"{size}²", f"{r['megapixels']:.1f}", f"{r['build_s']:.1f}",
                  f"{r['build_peak_mib']:.0f}", f"{r['grad_s']:.3g}", f"{r['grad_peak_mib']:.0f}",
                  f"{r['operators_mib']:.3f}", deepinv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
