"""Wall time of `scalebench replay` against the original `scalebench run`, side by side.

Runs an experiment (default: configs/default.yml) with `scalebench run --no-html` into a
private copy of the benchmark folder, replays the resulting parquet, and prints both wall
times and their ratio (target: replay at most 1.2x the original run).

    python -m tools.replay_overhead [--config configs/default.yml]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

from tools.measuring import (
    Finished,
    add_config,
    private_benchmark,
    run_config,
    run_scalebench,
    tool_parser,
)

TARGET_RATIO = 1.2
VERDICTS = ("MATCH", "DIFFER", "REFUSED", "TAMPERED")


def succeeded(finished: Finished, what: str) -> Finished:
    if finished.returncode != 0:
        sys.exit(f"scalebench {what} failed: {finished.stderr.strip()[-500:]}")
    return finished


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    add_config(parser)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        benchmark = private_benchmark(Path(folder))
        launch = run_config(args.config.resolve(), benchmark, "original")
        run = succeeded(launch.finished, "run")
        replay = succeeded(run_scalebench("replay", launch.results, "--benchmark", benchmark),
                           "replay")
    ratio = replay.wall_s / run.wall_s
    print(yaml.safe_dump({
        "config": str(args.config), "run_wall_s": round(run.wall_s, 2),
        "replay_wall_s": round(replay.wall_s, 2), "ratio_replay_over_run": round(ratio, 3),
        "target": f"<= {TARGET_RATIO}", "within_target": bool(ratio <= TARGET_RATIO),
        "verdicts": [line for line in replay.stdout.splitlines()
                     if line.split(" ")[0] in VERDICTS],
    }, sort_keys=False, width=200))


if __name__ == "__main__":
    main()
