"""Wall time of `scalebench replay` against the original `scalebench run`, side by side.

Runs an experiment (default: configs/default.yml) with `scalebench run --no-html` into a
private copy of the benchmark folder, replays the resulting parquet, and prints both wall
times and their ratio (target: replay at most 1.2x the original run).

    python tools/replay_overhead.py [--config configs/default.yml]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.2


def timed(*args: str) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "scalebench", *args], capture_output=True,
                            text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"scalebench {args[0]} failed: {result.stderr.strip()[-500:]}")
    return elapsed, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "default.yml")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        benchmark = Path(folder) / "benchmark_inference"
        shutil.copytree(REPO / "benchmark_inference", benchmark,
                        ignore=shutil.ignore_patterns("outputs", "__pycache__"))
        run_s, _ = timed("run", str(args.config.resolve()), "--benchmark", str(benchmark),
                         "--output", "original", "--no-html")
        results = benchmark / "outputs" / "original.parquet"
        replay_s, report = timed("replay", str(results), "--benchmark", str(benchmark))
    ratio = replay_s / run_s
    print(yaml.safe_dump({
        "config": str(args.config), "run_wall_s": round(run_s, 2),
        "replay_wall_s": round(replay_s, 2), "ratio_replay_over_run": round(ratio, 3),
        "target": f"<= {TARGET_RATIO}", "within_target": bool(ratio <= TARGET_RATIO),
        "verdicts": [line for line in report.splitlines() if line.split(" ")[0] in
                     ("MATCH", "DIFFER", "REFUSED", "TAMPERED")],
    }, sort_keys=False, width=200))


if __name__ == "__main__":
    main()
