"""`scalebench plan`'s per-rank memory estimate beside the measured peak of the same runs.

Runs a few 2-iteration experiments through `scalebench run` (one config, one result file),
then prints, per experiment, the plan's estimate, the largest peak host RSS of any step and
rank (``objective_*_peak_host_rss_mib_max``) and their ratio. Usage:

    .venv/bin/python tools/plan_memory.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
EXPERIMENT = {
    "objective": ["imaging_inverse_problem"],
    "dataset": [
        {"tomography_2d": {"image_size": 256, "num_angles": 180, "num_operators": 4}},
        {"multiframe_superres": {"image_size": 256, "num_frames": 4}},
    ],
    "solver": [
        {"pnp": {"denoiser": ["tv", "dncnn"], "max_iter": 2, "device": "cpu",
                 "denoiser_sigma": 0.01}},
        {"pnp": {"denoiser": "dncnn", "patch_size": 64, "overlap": 8, "max_batch_size": 4,
                 "max_iter": 2, "device": "cpu", "denoiser_sigma": 0.01}},
    ],
    "max-runs": 10,
    "timeout": "30m",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None, help="folder for the results")
    args = parser.parse_args()
    from scalebench.plan import make_plan

    with tempfile.TemporaryDirectory(prefix="plan-memory-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "plan_memory.yml"
        config.write_text(yaml.safe_dump(EXPERIMENT, sort_keys=False))
        plan = make_plan(config, None, 1)
        subprocess.run([sys.executable, "-m", "scalebench", "run", str(config), "--output",
                        "plan_memory", "--outputs", str(folder), "--no-html"], check=True,
                       stdout=subprocess.DEVNULL)
        rows = pd.read_parquet(folder / "plan_memory.parquet")
    peaks = rows.filter(like="peak_host_rss_mib_max").max(axis=1).groupby(
        rows["experiment_id"]).max()
    print(f"{'experiment':60}  {'estimate MiB':>12}  {'measured MiB':>12}  {'ratio':>6}")
    for job in plan.jobs:
        estimate = job.rank_memory_bytes / 2**20
        measured = peaks[job.id]
        print(f"{job.label[:60]:60}  {estimate:12.0f}  {measured:12.0f}  "
              f"{estimate / measured:6.2f}")


if __name__ == "__main__":
    main()
