"""Cost of the benchmark harness over the bare PnP loop, measured side by side in one process.

Runs, alternately and REPEATS times each, (a) a bare PnP loop written directly against the
physics and the denoiser, and (b) the same loop through benchopt (`benchmark_inference`,
solver `pnp`, every iteration evaluated, light profiler), on the same 256x256 tomography
problem, then prints the loop times and the ratio of their minima (the least disturbed run of
each kind on a shared machine) next to the ratio of their medians. The benchopt figure is its own
solver clock at the last iteration (metric evaluation excluded, profiler synchronisation and
callbacks included); the wall time of the whole benchopt run is printed for information.

    python tools/harness_overhead.py [--size 256] [--angles 180] [--iterations 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.03


def bare_loop_seconds(dataset: dict, solver: dict) -> float:
    from scalebench.denoisers import build_denoiser
    from scalebench.determinism import apply_determinism
    from scalebench.problems import build_problem
    from scalebench.solvers.pnp import initial_estimate, operator_norm_squared

    apply_determinism(True, seed=0)  # the benchmark's default mode, for a like-for-like loop
    problem = build_problem("tomography_2d", **dataset)
    denoiser = build_denoiser(solver["denoiser"], 1)
    lipschitz = operator_norm_squared(problem)
    x = initial_estimate(problem, solver["init"], lipschitz)
    gamma, sigma, A = 1.0 / lipschitz, solver["denoiser_sigma"], problem.physics
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(solver["max_iter"]):
            x = denoiser(x - gamma * A.A_adjoint(A.A(x) - problem.y), sigma)
    return time.perf_counter() - start


def benchmark_loop_seconds(dataset: dict, solver: dict, workdir: Path) -> tuple[float, float]:
    """(benchopt's solver time at the last iteration, wall time of the whole run)."""
    import pandas as pd
    from benchopt import run_benchmark

    name = "tomography_2d[" + ",".join(f"{k}={v}" for k, v in dataset.items()) + "]"
    solver_name = "pnp[" + ",".join(f"{k}={v}" for k, v in solver.items()) + "]"
    output = workdir / f"overhead_{time.monotonic_ns()}.parquet"
    start = time.perf_counter()
    run_benchmark(str(REPO / "benchmark_inference"), solver_names=[solver_name],
                  dataset_names=[name], max_runs=solver["max_iter"] + 1, n_repetitions=1,
                  timeout=3600, plot_result=False, display=False, show_progress=False,
                  no_cache=True, output_file=str(output))
    wall = time.perf_counter() - start
    df = pd.read_parquet(output)
    return float(df.time.iloc[-1]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--angles", type=int, default=180)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    dataset = dict(image_size=args.size, num_angles=args.angles, num_operators=1,
                   noise_level=0.05, seed=0)
    solver = dict(denoiser="tv", denoiser_sigma=0.002, init="adjoint", max_iter=args.iterations,
                  device="cpu", profiler="light")
    bare, bench, wall = [], [], []
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.repeats):
            bare.append(bare_loop_seconds(dataset, solver))
            loop_time, run_time = benchmark_loop_seconds(dataset, solver, Path(workdir))
            bench.append(loop_time)
            wall.append(run_time)
    ratio = min(bench) / min(bare)
    print(yaml.safe_dump({
        "problem": f"tomography_2d {args.size}x{args.size}, {args.angles} angles, TV denoiser",
        "iterations": args.iterations, "threads": torch.get_num_threads(),
        "bare_loop_s": [round(t, 4) for t in bare],
        "benchmark_loop_s": [round(t, 4) for t in bench],
        "benchmark_run_wall_s": [round(t, 3) for t in wall],
        "ratio_benchmark_over_bare_min": round(ratio, 4),
        "ratio_benchmark_over_bare_median": round(statistics.median(bench)
                                                  / statistics.median(bare), 4),
        "target": f"<= {TARGET_RATIO}", "within_target": bool(ratio <= TARGET_RATIO),
    }, sort_keys=False))


if __name__ == "__main__":
    main()
