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

    python -m tools.distributed_scaling [--iterations 4] [--repeats 1]
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

from tools.measuring import (
    add_iterations,
    add_repeats,
    median,
    pnp_config,
    private_benchmark,
    run_config,
    tool_parser,
    write_config,
)

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
              "tile_size": 256, "tile_overlap": 16, "tiles_per_batch": 2,
              "device": "cpu", "num_threads": threads,
              "distribute_physics": distributed, "distribute_denoiser": distributed}
    config = write_config(workdir / f"{variant}.yml",
                          pnp_config(dataset, solver, iterations, "2h"))
    launch = run_config(config, workdir / "benchmark_inference",
                        f"{variant}_{next(RUN_NUMBERS)}", ranks)
    if launch.finished.returncode:
        raise SystemExit(f"{variant} failed:\n{launch.finished.stderr[-3000:]}")
    df = launch.rows()
    rows = df[df.stop_val > 1]  # iteration 1 warms caches up
    return {stage: [float(v) for v in rows[f"objective_{stage}_max"]] for stage in STAGES}


def summarise(runs: dict[str, list[dict]]) -> dict:
    median_of = {variant: {stage: median(v for run in found for v in run[stage])
                           for stage in STAGES} for variant, found in runs.items()}
    total = {variant: m["grad_time_s"] + m["denoise_time_s"]
             for variant, m in median_of.items()}
    speedup_threads = total["plain"] / total["dist2"]
    speedup_core = total["single1"] / total["dist2"]
    return {
        "median_iteration_s": {v: round(t, 4) for v, t in total.items()},
        "median_stage_s": {v: {s: round(x, 4) for s, x in m.items()}
                           for v, m in median_of.items()},
        "overhead_dist1_over_plain": round(total["dist1"] / total["plain"], 4),
        "overhead_target": f"<= {TARGET_OVERHEAD}",
        "speedup_2_ranks_over_1_rank_2_threads": round(speedup_threads, 3),
        "speedup_2_ranks_over_1_core": round(speedup_core, 3),
        "parallel_efficiency_vs_1_core": round(speedup_core / 2, 3),
        "communication_share_2_ranks": round(median_of["dist2"]["comm_time_s"]
                                             / total["dist2"], 4),
    }


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    add_iterations(parser, 4, "PnP iterations per run (the first one warms caches up)")
    add_repeats(parser, 1, "runs of each variant, alternated")
    args = parser.parse_args(argv)
    report = {}
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        private_benchmark(workdir)
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
