"""Ranks against threads on this machine, and the distributed path's own cost, side by side.

For each problem (2D CT 512x512 with 256 angles in 8 operators; multi-frame super-resolution
of a 512x512 colour image, 4 frames), PnP with a seeded DnCNN on 4 tiles of 256x256 runs
through `scalebench run` as:
  plain     1 rank x 2 threads, nothing distributed (deepinv's stacked physics, local tiles)
  dist1     1 rank x 2 threads, distribute_physics and distribute_denoiser on
  dist2     2 ranks x 1 thread, both distributed (gloo)
  single1   1 rank x 1 thread, nothing distributed (the one-core baseline)
in that order, repeated. It prints the median per-iteration time of each stage (gradient,
denoiser, communication: the maximum over ranks), the overhead of the distributed path on one
rank (dist1 / plain; target at most 1.05), the speedup of 2 ranks over 1 rank x 2 threads
and over one core, the parallel efficiency (speedup over one core / 2) and the share of the
iteration spent communicating.

    python tools/distributed_scaling.py [--iterations 4] [--repeats 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
TARGET_OVERHEAD = 1.05
PROBLEMS = {
    "tomography_2d 512x512, 256 angles, 8 operators":
        {"tomography_2d": {"image_size": 512, "num_angles": 256, "num_operators": 8}},
    "multiframe_superres 512x512 RGB, 4 frames":
        {"multiframe_superres": {"image_size": 512, "num_frames": 4}},
}
VARIANTS = {  # name: (ranks, threads, distributed)
    "plain": (1, 2, False), "dist1": (1, 2, True), "dist2": (2, 1, True),
    "single1": (1, 1, False),
}
STAGES = ("grad_time_s", "denoise_time_s", "comm_time_s")
RUN_NUMBERS = itertools.count()


def run_variant(workdir: Path, dataset: dict, variant: str, iterations: int) -> dict:
    ranks, threads, distributed = VARIANTS[variant]
    # 4 tiles in batches of 2: one batch per rank on 2 ranks (seeded random DnCNN weights).
    solver = {"denoiser": "dncnn", "pretrained": "none", "denoiser_sigma": 0.02,
              "tile_size": 256, "tile_overlap": 16, "tiles_per_batch": 2, "max_iter": iterations,
              "device": "cpu", "num_threads": threads,
              "distribute_physics": distributed, "distribute_denoiser": distributed}
    config = workdir / f"{variant}.yml"
    config.write_text(yaml.safe_dump({"objective": ["imaging_inverse_problem"],
                                      "dataset": [dataset], "solver": [{"pnp": solver}],
                                      "max-runs": iterations + 1, "timeout": "2h"}))
    name = f"{variant}_{next(RUN_NUMBERS)}"
    benchmark = workdir / "benchmark_inference"
    done = subprocess.run([sys.executable, "-m", "scalebench", "run", str(config),
                           "--benchmark", str(benchmark), "--output", name, "--no-html",
                           "--nproc", str(ranks)], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")
    df = pd.read_parquet(benchmark / "outputs" / f"{name}.parquet")
    rows = df[df.stop_val > 1]  # iteration 1 warms caches up
    return {stage: [float(v) for v in rows[f"objective_{stage}_max"]] for stage in STAGES}


def summarise(runs: dict[str, list[dict]]) -> dict:
    median = {variant: {stage: statistics.median(v for run in found for v in run[stage])
                        for stage in STAGES} for variant, found in runs.items()}
    total = {variant: m["grad_time_s"] + m["denoise_time_s"] for variant, m in median.items()}
    speedup_threads = total["plain"] / total["dist2"]
    speedup_core = total["single1"] / total["dist2"]
    return {
        "median_iteration_s": {v: round(t, 4) for v, t in total.items()},
        "median_stage_s": {v: {s: round(x, 4) for s, x in m.items()}
                           for v, m in median.items()},
        "overhead_dist1_over_plain": round(total["dist1"] / total["plain"], 4),
        "overhead_target": f"<= {TARGET_OVERHEAD}",
        "speedup_2_ranks_over_1_rank_2_threads": round(speedup_threads, 3),
        "speedup_2_ranks_over_1_core": round(speedup_core, 3),
        "parallel_efficiency_vs_1_core": round(speedup_core / 2, 3),
        "communication_share_2_ranks": round(median["dist2"]["comm_time_s"] / total["dist2"],
                                             4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    report = {}
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        shutil.copytree(REPO / "benchmark_inference", workdir / "benchmark_inference",
                        ignore=shutil.ignore_patterns("outputs", "__pycache__"))
        for label, dataset in PROBLEMS.items():
            runs: dict[str, list[dict]] = {variant: [] for variant in VARIANTS}
            for _ in range(args.repeats):  # alternate, so that drifts hit every variant
                for variant in VARIANTS:
                    runs[variant].append(run_variant(workdir, dataset, variant,
                                                     args.iterations))
            report[label] = summarise(runs)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
