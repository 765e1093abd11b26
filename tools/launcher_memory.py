"""Resident memory of the launcher against the processes doing the work, during a real run.

Starts `scalebench run CONFIG --nproc N` (default: the embedded default experiment on 2 ranks)
and samples, every 0.1 s, the resident set (VmRSS) of the launcher process and of every
process below it (rank parents, benchopt workers, short-lived children); prints the peak of each
kind. Target: the launcher under 100 MB while the workers hold the stack.

    python -m tools.launcher_memory [--config configs/default.yml] [--nproc 2]
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from tests.support.cli import command_line
from tools.measuring import (
    add_config,
    launch_command,
    private_benchmark,
    tool_parser,
    write_config,
)

TARGET_MB = 100.0


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    """Every process below ``pid``."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        try:
            tasks = Path(f"/proc/{parent}/task").iterdir()
            direct = [int(c) for task in tasks
                      for c in (task / "children").read_text().split()]
        except OSError:
            direct = []
        found += direct
        queue += direct
    return found


def split_config(config: Path, folder: Path) -> Path:
    """The default experiment, with its work split across the ranks."""
    raw = yaml.safe_load(config.read_text())
    for entry in raw["solver"]:
        for params in entry.values():
            params.update({"distribute_denoiser": True, "tile_size": 64, "num_threads": 1})
    return write_config(folder / "split.yml", raw)


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    add_config(parser)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args(argv)
    peaks: dict[str, float] = {"launcher": 0.0, "rank parent": 0.0, "benchopt worker": 0.0,
                               "launcher child": 0.0}
    with tempfile.TemporaryDirectory() as folder:
        benchmark = private_benchmark(Path(folder))
        config = split_config(args.config, Path(folder)) if args.nproc > 1 else args.config
        launcher = subprocess.Popen(launch_command(config, benchmark, "memory", args.nproc),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while launcher.poll() is None:
            peaks["launcher"] = max(peaks["launcher"], rss_mb(launcher.pid))
            for pid in children(launcher.pid):
                line = command_line(pid)
                kind = ("rank parent" if "rank_entry" in line else
                        "benchopt worker" if "benchopt" in line else
                        "launcher child" if "launch.children" in line else None)
                if kind:
                    peaks[kind] = max(peaks[kind], rss_mb(pid))
            time.sleep(0.1)
        if launcher.returncode:
            raise SystemExit(launcher.stderr.read().decode()[-3000:])
    print(json.dumps({"config": str(args.config), "ranks": args.nproc,
                      "peak_rss_mb": {k: round(v, 1) for k, v in peaks.items()},
                      "launcher_target_mb": TARGET_MB,
                      "launcher_within_target": peaks["launcher"] < TARGET_MB}, indent=1))


if __name__ == "__main__":
    main()
