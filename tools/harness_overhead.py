"""Cost of the benchmark harness over the bare PnP loop, measured side by side in one process.

Runs, alternately and REPEATS times each, (a) a bare PnP loop written directly against the
physics and the denoiser, and (b) the same loop through benchopt (`benchmark_inference`,
solver `pnp`, every iteration evaluated, light profiler), on the same 256x256 tomography
problem. Each iteration is timed on its own (the bare loop with a clock around each iteration,
the benchmark from the differences of benchopt's solver clock between consecutive rows), and
the ratio of the median per-iteration times is the figure of merit: on a shared machine a
median over many iterations resists the sporadic slowdowns that dominate whole-run totals.
Ratios of the minima and of the run totals are printed beside it, and so is the cost of the
per-step instrumentation alone (two empty profiler steps), which noise cannot hide.
benchopt's clock excludes metric evaluation and includes the profiler and the callbacks.

    python -m tools.harness_overhead [--size 256] [--angles 180] [--iterations 20] [--repeats 5]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
import yaml

from scalebench.benchmarks import INFERENCE
from tools.measuring import Stopwatch, add_iterations, add_repeats, summary, tool_parser

TARGET_RATIO = 1.03


def bare_loop_seconds(dataset: dict, solver: dict) -> list[float]:
    from scalebench.denoisers.networks import build_denoiser
    from scalebench.loops.pnp import initial_estimate, operator_norm_squared
    from scalebench.problems import build_problem
    from scalebench.rank.determinism import apply_determinism

    apply_determinism(True, seed=0)  # the benchmark's default mode, for a like-for-like loop
    problem = build_problem("tomography_2d", **dataset)
    denoiser = build_denoiser(solver["denoiser"], 1)
    lipschitz = operator_norm_squared(problem)
    x = initial_estimate(problem, solver["init"], lipschitz)
    gamma, sigma, A = 1.0 / lipschitz, solver["denoiser_sigma"], problem.physics
    times = []
    with torch.no_grad():
        for _ in range(solver["max_iter"]):
            with Stopwatch() as watch:
                x = denoiser(x - gamma * A.A_adjoint(A.A(x) - problem.y), sigma)
            times.append(watch.seconds)
    return times


def benchmark_loop_seconds(dataset: dict, solver: dict, workdir: Path) -> list[float]:
    """Per-iteration solver times from benchopt's clock (evaluation excluded)."""
    import pandas as pd
    from benchopt import run_benchmark

    name = "tomography_2d[" + ",".join(f"{k}={v}" for k, v in dataset.items()) + "]"
    solver_name = "pnp[" + ",".join(f"{k}={v}" for k, v in solver.items()) + "]"
    output = workdir / f"overhead_{time.monotonic_ns()}.parquet"
    run_benchmark(str(INFERENCE.path), solver_names=[solver_name],
                  dataset_names=[name], max_runs=solver["max_iter"] + 1, n_repetitions=1,
                  timeout=3600, plot_result=False, display=False, show_progress=False,
                  no_cache=True, output_file=str(output))
    clock = pd.read_parquet(output).sort_values("stop_val").time.to_numpy()
    return [float(t) for t in clock[1:] - clock[:-1]]


def instrumentation_seconds(repeats: int = 10_000) -> float:
    """Cost of the light profiler around one iteration's two steps, with nothing inside."""
    from scalebench.rank.profiling import StepProfiler

    profiler = StepProfiler(torch.device("cpu"))
    with Stopwatch() as watch:
        for _ in range(repeats):
            with profiler.step("grad"):
                pass
            with profiler.step("denoise"):
                pass
    return watch.seconds / repeats


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--angles", type=int, default=180)
    add_iterations(parser, 20)
    add_repeats(parser, 5, "runs of each loop, alternated")
    args = parser.parse_args(argv)
    dataset = dict(image_size=args.size, num_angles=args.angles, num_operators=1,
                   noise_level=0.05, seed=0)
    solver = dict(denoiser="tv", denoiser_sigma=0.002, init="adjoint", max_iter=args.iterations,
                  device="cpu", profiler="light")
    bare, bench = [], []
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.repeats):  # alternate, so that drifts hit both alike
            bare.append(bare_loop_seconds(dataset, solver))
            bench.append(benchmark_loop_seconds(dataset, solver, Path(workdir)))
    bare_all = summary(t for run in bare for t in run)
    bench_all = summary(t for run in bench for t in run)
    ratio = bench_all.median / bare_all.median
    instrumentation = instrumentation_seconds()
    print(yaml.safe_dump({
        "problem": f"tomography_2d {args.size}x{args.size}, {args.angles} angles, TV denoiser",
        "iterations_per_run": args.iterations, "runs_each": args.repeats,
        "threads": torch.get_num_threads(),
        "bare_iteration_median_s": round(bare_all.median, 4),
        "benchmark_iteration_median_s": round(bench_all.median, 4),
        "bare_run_totals_s": [round(sum(run), 3) for run in bare],
        "benchmark_run_totals_s": [round(sum(run), 3) for run in bench],
        "ratio_median_iteration": round(ratio, 4),
        "ratio_min_iteration": round(bench_all.lowest / bare_all.lowest, 4),
        "ratio_total": round(sum(map(sum, bench)) / sum(map(sum, bare)), 4),
        "instrumentation_per_iteration_s": round(instrumentation, 6),
        "instrumentation_share": round(instrumentation / bare_all.median, 6),
        "target": f"<= {TARGET_RATIO}", "within_target": bool(ratio <= TARGET_RATIO),
    }, sort_keys=False))


if __name__ == "__main__":
    main()
