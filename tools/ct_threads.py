"""Every core against one: CT's gradient step and set-up, and radio's iteration, side by side.

Each measurement runs in a fresh child process with torch's thread count set (the operators
follow it: ASTRA's angle blocks, ducc0, finufft):

- CT (tomography_2d, ASTRA's CPU projector, as many angles as pixels per side): the median
  gradient step ``A^T (A x - y)`` over ``--iterations`` with the step's CPU utilisation, on
  every core and on one; the set-up (||A||^2 by scalebench.rank.operator_norm, computed,
  never read from a cache, then the adjoint initial estimate) on every core, against the set-up
  before the angle blocks and the warm-started Lanczos: the power iteration that stops at a 1e-4
  relative change from a random start, on one core ("legacy": the one-core child's set-up;
  ``--legacy-sizes`` picks where it runs, at 2048² it takes most of an hour; elsewhere the
  one-core child sets up as the benchmark does).
- Radio (configs/examples/radio_interferometry.yml's sky and telescope, natural weighting):
  the median PnP-TV iteration on every core and on one.

Targets: gradient step >= 1.8x faster on every core at 1024² and 2048²; set-up at 2048² at
most a third of the legacy one.

    python -m tools.ct_threads [--sizes 1024 2048] [--legacy-sizes 1024 2048]
        [--iterations 2] [--radio-iterations 5] [--threads N (default: every core)]
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
    add_iterations,
    add_sizes,
    child_figures,
    median,
    print_figures,
    print_targets,
    tool_parser,
)

GRAD_TARGET, SETUP_TARGET = 1.8, 1 / 3
RADIO = {"image_size": 256, "declination_deg": -30.0, "hour_angle_start": -4.0,
         "hour_angle_end": 4.0, "num_times": 64, "frequency_mhz": 1284.0,
         "bandwidth_mhz": 856.0, "num_channels": 8, "weighting": "natural",
         "num_operators": 4, "noise_level": 0.01}


def ct(size: int, iterations: int, legacy: bool) -> dict:
    """Gradient step and set-up of CT at ``size`` in this process."""
    import torch

    from scalebench.loops.pnp import initial_estimate
    from scalebench.problems import build_problem
    from scalebench.rank import operator_norm
    from scalebench.rank.profiling import StepProfiler

    problem = build_problem("tomography_2d", image_size=size, num_angles=size,
                            projector="astra", noise_level=0.01)
    with Stopwatch() as setup:
        if legacy:
            norm, applications = operator_norm.power_iteration(problem, 30, 1e-4)
            start_applications = 0
        else:
            norm, applications, start_applications = operator_norm.lanczos(problem)
        x = initial_estimate(problem, "adjoint", norm)
    profiler = StepProfiler(torch.device("cpu"))
    steps, shares = [], []
    for _ in range(iterations):
        with profiler.step("grad"), torch.no_grad():
            x = x - problem.physics.A_adjoint(problem.physics.A(x) - problem.y) / norm
        steps.append(profiler.last["grad_time_s"])
        shares.append(profiler.last["grad_cpu_utilization"])
    return {"setup_s": setup.seconds, "norm": norm, "applications": applications,
            "start_applications": start_applications, "grad_s": median(steps),
            "grad_cpu": median(shares)}


def radio(iterations: int) -> dict:
    """Median PnP-TV iteration of the radio example's problem in this process."""
    import torch

    from scalebench.denoisers.networks import build_denoiser
    from scalebench.loops.inference_parameters import pnp_parameters
    from scalebench.loops.pnp import PnPLoop
    from scalebench.problems import build_problem
    from scalebench.rank.profiling import StepProfiler

    problem = build_problem("radio_interferometry", **RADIO)
    profiler = StepProfiler(torch.device("cpu"))
    loop = PnPLoop(problem, build_denoiser("tv", 1),
                   pnp_parameters(denoiser_sigma=0.001, init="dirty"), profiler)
    times, shares = [], []
    for _ in range(iterations):
        with Stopwatch() as watch:
            loop.iterate()
        times.append(watch.seconds)
        shares.append(profiler.last["grad_cpu_utilization"])
    return {"iteration_s": median(times), "grad_cpu": median(shares)}


def child(what: str, threads: int, *args: str) -> dict:
    """``what`` run in a fresh process on ``threads`` threads (a fresh norm cache)."""
    environment = {**os.environ, "SCALEBENCH_CACHE": tempfile.mkdtemp(prefix="sb-threads-"),
                   "OMP_NUM_THREADS": str(threads)}
    try:
        return child_figures(__spec__.name, what, threads, *args, env=environment)
    except ChildFailed as error:
        raise SystemExit(f"{what} on {threads} thread(s) failed: {error}") from None


def run_child(what: str, threads: int, args: list[str]) -> dict:
    import torch

    torch.set_num_threads(threads)
    if what == "radio":
        return radio(int(args[0]))
    return ct(int(args[0]), int(args[1]), args[2] == "legacy")


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    add_sizes(parser, [1024, 2048])
    parser.add_argument("--legacy-sizes", type=int, nargs="*", default=None,
                        help="sizes whose legacy set-up runs (default: every size)")
    add_iterations(parser, 2, "gradient steps timed per size")
    parser.add_argument("--radio-iterations", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="every core's thread count (default: this machine's cores)")
    add_child(parser)
    args = parser.parse_args(argv)
    if args.child:
        what, threads, *rest = args.child
        print_figures(run_child(what, int(threads), rest))
        return 0
    every, legacy_sizes = args.threads, args.sizes if args.legacy_sizes is None \
        else args.legacy_sizes
    print(f"CT, ASTRA CPU, {every} threads against 1 (angles = size)")
    table = Table("size", "grad_s 1", "grad_s N", "speedup", "cpu N", "setup_s legacy",
                  "setup_s N", "ratio", "norm (applications)")
    table.header()
    targets = []
    for size in args.sizes:
        legacy = size in legacy_sizes
        one = child("ct", 1, str(size), str(args.iterations), "legacy" if legacy else "new")
        many = child("ct", every, str(size), str(args.iterations), "new")
        speedup = one["grad_s"] / many["grad_s"]
        targets.append((f"{size}² gradient step speedup", speedup >= GRAD_TARGET,
                        f"{speedup:.2f}"))
        ratio = many["setup_s"] / one["setup_s"] if legacy else float("nan")
        if legacy:
            targets.append((f"{size}² set-up / legacy", ratio <= SETUP_TARGET, f"{ratio:.2f}"))
        norms = (f"{many['norm']:.6g} ({many['applications']} + {many['start_applications']}"
                 f" start)" + (f", legacy {one['norm']:.6g} ({one['applications']})"
                               if legacy else ""))
        table.row(f"{size}²", f"{one['grad_s']:.2f}", f"{many['grad_s']:.2f}", f"{speedup:.2f}",
                  f"{many['grad_cpu']:.2f}", f"{one['setup_s']:.1f}" if legacy else "not run",
                  f"{many['setup_s']:.1f}", f"{ratio:.2f}", norms)
    one, many = (child("radio", threads, str(args.radio_iterations)) for threads in (1, every))
    print(f"radio example (natural weighting, PnP-TV): iteration {one['iteration_s']:.3f} s on "
          f"1 thread, {many['iteration_s']:.3f} s on {every} "
          f"({one['iteration_s'] / many['iteration_s']:.2f}x; gradient step CPU "
          f"{many['grad_cpu']:.2f} cores)")
    return print_targets(targets)


if __name__ == "__main__":
    sys.exit(main())
