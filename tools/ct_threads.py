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

    python tools/ct_threads.py [--sizes 1024 2048] [--legacy-sizes 1024 2048]
        [--iterations 2] [--radio-iterations 5] [--threads N (default: every core)]
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
    start = time.perf_counter()
    if legacy:
        norm, applications = operator_norm.power_iteration(problem, 30, 1e-4)
        start_applications = 0
    else:
        norm, applications, start_applications = operator_norm.lanczos(problem)
    x = initial_estimate(problem, "adjoint", norm)
    setup_s = time.perf_counter() - start
    profiler = StepProfiler(torch.device("cpu"))
    steps, shares = [], []
    for _ in range(iterations):
        with profiler.step("grad"), torch.no_grad():
            x = x - problem.physics.A_adjoint(problem.physics.A(x) - problem.y) / norm
        steps.append(profiler.last["grad_time_s"])
        shares.append(profiler.last["grad_cpu_utilization"])
    return {"setup_s": setup_s, "norm": norm, "applications": applications,
            "start_applications": start_applications, "grad_s": statistics.median(steps),
            "grad_cpu": statistics.median(shares)}


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
        start = time.perf_counter()
        loop.iterate()
        times.append(time.perf_counter() - start)
        shares.append(profiler.last["grad_cpu_utilization"])
    return {"iteration_s": statistics.median(times), "grad_cpu": statistics.median(shares)}


def child(what: str, threads: int, *args: str) -> dict:
    """``what`` run in a fresh process on ``threads`` threads (a fresh norm cache)."""
    environment = {**os.environ, "SCALEBENCH_CACHE": tempfile.mkdtemp(prefix="sb-threads-"),
                   "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, __file__, "--child", what, str(threads), *args],
                          capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{what} on {threads} thread(s) failed: "
                         f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_child(what: str, threads: int, args: list[str]) -> dict:
    import torch

    torch.set_num_threads(threads)
    if what == "radio":
        return radio(int(args[0]))
    return ct(int(args[0]), int(args[1]), args[2] == "legacy")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--legacy-sizes", type=int, nargs="*", default=None,
                        help="sizes whose legacy set-up runs (default: every size)")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--radio-iterations", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, threads, *rest = args.child
        print(json.dumps(run_child(what, int(threads), rest)))
        return 0
    every, legacy_sizes = args.threads, args.sizes if args.legacy_sizes is None \
        else args.legacy_sizes
    print(f"CT, ASTRA CPU, {every} threads against 1 (angles = size)")
    print(f"{'size':>6} {'grad_s 1':>9} {'grad_s N':>9} {'speedup':>8} {'cpu N':>6} "
          f"{'setup_s legacy':>15} {'setup_s N':>10} {'ratio':>6}  norm (applications)")
    verdicts = []
    for size in args.sizes:
        legacy = size in legacy_sizes
        one = child("ct", 1, str(size), str(args.iterations), "legacy" if legacy else "new")
        many = child("ct", every, str(size), str(args.iterations), "new")
        speedup = one["grad_s"] / many["grad_s"]
        verdicts.append((f"{size}² gradient step speedup", speedup, speedup >= GRAD_TARGET))
        ratio = many["setup_s"] / one["setup_s"] if legacy else float("nan")
        if legacy:
            verdicts.append((f"{size}² set-up / legacy", ratio, ratio <= SETUP_TARGET))
        legacy_text = f"{one['setup_s']:15.1f}" if legacy else f"{'not run':>15}"
        norms = (f"{many['norm']:.6g} ({many['applications']} + {many['start_applications']}"
                 f" start)" + (f", legacy {one['norm']:.6g} ({one['applications']})"
                               if legacy else ""))
        print(f"{size:>5}² {one['grad_s']:9.2f} {many['grad_s']:9.2f} {speedup:8.2f} "
              f"{many['grad_cpu']:6.2f} {legacy_text} {many['setup_s']:10.1f} {ratio:6.2f}  "
              f"{norms}", flush=True)
    one, many = (child("radio", threads, str(args.radio_iterations)) for threads in (1, every))
    print(f"radio example (natural weighting, PnP-TV): iteration {one['iteration_s']:.3f} s on "
          f"1 thread, {many['iteration_s']:.3f} s on {every} "
          f"({one['iteration_s'] / many['iteration_s']:.2f}x; gradient step CPU "
          f"{many['grad_cpu']:.2f} cores)")
    for name, value, met in verdicts:
        print(f"target {name}: {value:.2f} {'met' if met else 'NOT met'}")
    return 0 if all(met for _, _, met in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
