"""GPU check of the distributed path: CUDA + NCCL runs through `scalebench run`, figures printed.

Runs, on the first GPU, with each experiment's rows read back:
  ct_1rank        2D CT 512x512 (256 angles, 8 operators), PnP + random DRUNet, 1 rank
  ct_1rank_dist   the same with distribute_physics / distribute_denoiser (4 tiles), 1 rank
  ct_2ranks       the same on 2 ranks sharing the GPU (NCCL; recorded as refused where NCCL
                  will not put two ranks on one device)
  sr_1rank        multi-frame super-resolution 1024x1024 RGB, 4 frames, DnCNN, 1 rank
  compile         DnCNN through torch.compile, 1 rank
and checks that the CUDA peak-memory columns are filled, that step times are positive, that
the distributed path on one rank reproduces the plain one's digests where it should, and that
2 ranks reproduce 1 rank. Prints one JSON document.

    python tools/gpu_check.py [--iterations 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
CT = {"tomography_2d": {"image_size": 512, "num_angles": 256, "num_operators": 8}}
SR = {"multiframe_superres": {"image_size": 1024, "num_frames": 4}}
BASE = {"device": "cuda", "denoiser": "drunet", "denoiser_sigma": 0.02, "patch_size": 256,
        "overlap": 32}
CASES = {
    "ct_1rank": (CT, {**BASE}, 1),
    "ct_1rank_dist": (CT, {**BASE, "distribute_physics": True, "distribute_denoiser": True}, 1),
    "ct_2ranks": (CT, {**BASE, "distribute_physics": True, "distribute_denoiser": True}, 2),
    "sr_1rank": (SR, {**BASE, "denoiser": "dncnn", "patch_size": 0}, 1),
    "compile": (SR, {**BASE, "denoiser": "dncnn", "patch_size": 0, "compile": True}, 1),
}


def run_case(workdir: Path, name: str, iterations: int) -> dict:
    dataset, solver, ranks = CASES[name]
    config = workdir / f"{name}.yml"
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"], "dataset": [dataset],
        "solver": [{"pnp": {**solver, "max_iter": iterations}}],
        "max-runs": iterations + 1, "timeout": "1h"}))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "scalebench", "run", str(config),
                           "--benchmark", str(workdir / "benchmark_inference"), "--output",
                           name, "--no-html", "--nproc", str(ranks)], capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        return {"status": "failed", "wall_s": round(wall, 1),
                "error": [line for line in done.stderr.splitlines() if line][-3:]}
    df = pd.read_parquet(workdir / "benchmark_inference" / "outputs" / f"{name}.parquet")
    rows = df[df.stop_val > 1].sort_values("stop_val")
    figures = {"status": "ok", "wall_s": round(wall, 1), "world_size": int(
        df.prov_world_size.iloc[0]), "gpu": df.prov_gpu_models.iloc[0],
        "driver": df.prov_gpu_driver.iloc[0], "nccl": df.prov_nccl.iloc[0],
        "psnr_last_db": round(float(df.sort_values("stop_val").objective_psnr_db.iloc[-1]), 4),
        "digests": df.sort_values("stop_val").prov_result_sha256.tolist()}
    for column in ("grad_time_s_max", "denoise_time_s_max", "comm_time_s_max",
                   "grad_peak_cuda_alloc_mib_max", "denoise_peak_cuda_alloc_mib_max",
                   "comm_bytes"):
        values = rows[f"objective_{column}"]
        figures[column] = round(float(statistics.median(values)), 5)
    figures["cuda_columns_filled"] = bool(
        (rows.objective_grad_peak_cuda_alloc_mib > 0).all()
        and (rows.objective_denoise_peak_cuda_alloc_mib > 0).all())
    figures["setup_time_s"] = round(float(rows.objective_setup_time_s.iloc[0]), 3)
    figures["compile_time_s"] = round(float(rows.objective_compile_time_s.iloc[0]), 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()
    report = {}
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        shutil.copytree(REPO / "benchmark_inference", workdir / "benchmark_inference",
                        ignore=shutil.ignore_patterns("outputs", "__pycache__"))
        for name in CASES:
            report[name] = run_case(workdir, name, args.iterations)
            print(f"{name}: {report[name]['status']} in {report[name]['wall_s']} s",
                  file=sys.stderr, flush=True)
    one, two = report["ct_1rank_dist"], report["ct_2ranks"]
    if one["status"] == two["status"] == "ok":
        report["two_ranks_match_one_rank_bitwise"] = one["digests"] == two["digests"]
        report["psnr_difference_db"] = abs(one["psnr_last_db"] - two["psnr_last_db"])
    for figures in report.values():
        if isinstance(figures, dict):
            figures.pop("digests", None)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
